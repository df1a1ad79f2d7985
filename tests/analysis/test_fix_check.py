"""The prediction check of `membound compare` (`analysis.fix_check`): what the report before
predicted for the fix applied, against the saving measured, on recorded pairs of real runs."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from membound.analysis import analyze
from membound.analysis.compare import compare, load_report, validate
from membound.analysis.fix_check import applied_fixes, tolerance_ms, within_tolerance
from membound.analysis.remedies import combined
from membound.cli import main
from membound.demos import recorded_ceilings, recorded_trace
from membound.device.ceilings import Ceilings
from membound.errors import BadInput
from membound.report.compare import prediction_line
from membound.report.json_report import to_dict

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def dcgan():
    """The DCGAN of examples/real, eager and with --compile, recorded in one H100 device call
    (2026-12-05) on the ceilings measured in it."""
    ceilings = Ceilings.load(FIXTURES / "h100_samecall_ceilings.json")
    return tuple(
        to_dict(analyze([FIXTURES / name / "trace.json.gz"], ceilings))
        for name in ("h100_samecall_dcgan", "h100_samecall_dcgan_compiled")
    )


@pytest.fixture(scope="module")
def demo():
    c = recorded_ceilings()
    names = ("input-a-pageable", "input-b-dl-pinned", "input-c-prefetch")
    return {n: to_dict(analyze(recorded_trace(n), c)) for n in names}


def _remedy(report: dict, key: str) -> float:
    return next(r["saving_ms_per_step"] for r in report["remedies"] if r["remedy"] == key)


def test_compiled_dcgan_compile_inferred_and_its_prediction_checked(dcgan):
    """The eager DCGAN's report predicted compile to save several ms a step (4.85, the
    findings' sum) until the fourteenth session; in the same device call the compiled
    DCGAN's unprofiled step was the same (15.23 -> 15.16 ms). compile is now read from its
    own replay (`analysis.compile_whatif`), which predicts about nothing (a 0.10 ms loss until
    the fifteenth session, 0.01 saved since the replay stopped taking async device-to-device
    copies for waits): the check infers compile from inductor's kernels and finds the
    prediction within tolerance."""
    before, after = dcgan
    p = compare(before, after)["prediction"]
    assert p["fixes"] == ["compile"] and p["how"] == "inferred"
    assert "inductor's kernels hold 19% of the GPU op time after, 0% before" in p["shown_by"][0]
    assert p["basis"] == "unprofiled"
    assert p["measured_ms"] == pytest.approx(15.2307 - 15.1618)
    assert p["predicted_ms"] == pytest.approx(_remedy(before, "compile"), abs=1e-3)
    assert abs(p["predicted_ms"]) < 0.1  # the fused launches about pay for its runtime
    assert p["within_tolerance"] is True
    assert p["error_ms"] == pytest.approx(p["predicted_ms"] - p["measured_ms"])
    assert p["top_remedy"]["remedy"] != "compile"
    line = prediction_line(p)
    assert "compile was to save 0.01" in line and "within the tolerance" in line


def test_compiled_dcgan_idle_rows_show_where_the_host_time_went(dcgan):
    """Compile cut the GPU's wait for launches by about 1 ms a step, and the host time
    outside any op (the compiled code's own runtime: guards, AOTAutograd's wrappers) grew
    by more: the idle rows show both."""
    idle = compare(*dcgan)["idle_by_cause"]
    launch, other = idle["launch"], idle["other"]
    assert launch["before"] - launch["after"] == pytest.approx(1.035, abs=0.01)
    assert other["after"] - other["before"] == pytest.approx(1.735, abs=0.01)
    assert list(idle)[0] == "profiler"  # ordered by size: the profiler's share is largest


def test_demo_prefetch_inferred_within_tolerance(demo):
    """The demo's prefetcher: pageable-copy gone, blocking-copy 0.70 -> 0.08 ms/step."""
    before, after = demo["input-a-pageable"], demo["input-c-prefetch"]
    p = compare(before, after)["prediction"]
    assert p["fixes"] == ["prefetch"]
    assert p["basis"] == "trace median"  # the demo traces have no step timer
    assert p["predicted_ms"] == pytest.approx(_remedy(before, "prefetch"), abs=1e-3)
    assert p["within_tolerance"] is True  # 6.06 predicted, 6.26 measured
    assert "trace-median (profiled) step saved" in prediction_line(p)


def test_demo_loader_pinning_inferred_and_its_loss_said(demo):
    """The DataLoader's own pin_memory in the demo: pageable-copy gone, the loader's wait
    grew (input-starved new): pin_memory inferred, and the step lost time."""
    p = compare(demo["input-a-pageable"], demo["input-b-dl-pinned"])["prediction"]
    assert p["fixes"] == ["pin_memory"] and p["measured_ms"] < -5
    assert p["within_tolerance"] is False
    assert "step lost" in prediction_line(p)


def test_given_fix_replaces_inference_and_combines():
    ceilings = Ceilings.load(FIXTURES / "h200_ceilings.json")
    before, after = (
        to_dict(analyze([FIXTURES / name / "trace.json.gz"], ceilings))
        for name in ("h200_launch_bound", "h200_launch_bound_graphed")
    )
    # CUDA graphs leave no sign in the reports: nothing inferred, the top remedy is said
    p = compare(before, after)["prediction"]
    assert p["fixes"] == [] and p["predicted_ms"] is None
    assert "name it with --fix KEY" in prediction_line(p)
    p = compare(before, after, ["cuda_graphs"])["prediction"]
    assert p["how"] == "given" and p["offered"] == ["cuda_graphs"]
    assert p["predicted_ms"] == pytest.approx(_remedy(before, "cuda_graphs"), abs=1e-3)
    assert p["within_tolerance"] is True  # the planted loop graphed: 6.50 ms measured
    # two fixes: each finding counted once (launch-bound is both's)
    both = compare(before, after, ["cuda_graphs", "compile"])["prediction"]["predicted_ms"]
    assert both == pytest.approx(_remedy(before, "compile"), abs=1e-3)


def _report(ops, findings=(), remedies=()):
    return validate({
        "schema": 1,
        "steps": {"count": 2, "median_step_ms": 10.0, "unprofiled_median_ms": 10.0},
        "findings": [{"code": c, "time_lost_ms_per_step": v} for c, v in findings],
        "ops": [{"name": n, "device_ms": t, "dtypes": d} for n, t, d in ops],
        "remedies": [{"remedy": k, "saving_ms_per_step": v} for k, v in remedies],
    })  # fmt: skip


def test_bf16_inferred_from_the_ops_dtypes_and_named_as_offered():
    fp32 = _report([("aten::mm", 8.0, ["float"]), ("aten::add", 2.0, ["float"])])
    bf16 = _report([("aten::mm", 4.0, ["c10::BFloat16"]), ("aten::add", 2.0, ["float"])])
    assert applied_fixes(fp32, bf16)[0][0] == "bf16"
    assert "67% of the GPU op time after, 0% before" in applied_fixes(fp32, bf16)[0][1]
    storage = copy.deepcopy(fp32)
    storage["remedies"] = [{"remedy": "bf16_storage", "saving_ms_per_step": 1.0}]
    assert applied_fixes(storage, bf16)[0][0] == "bf16_storage"
    # a rise below HALF_RISE is no sign
    some = _report([("aten::mm", 8.0, ["float"]), ("aten::add", 2.0, ["c10::Half"])])
    assert applied_fixes(fp32, some) == []


def test_fused_optimizer_and_sync_less_inferred():
    foreach = _report([("aten::mm", 5.0, ["float"]), ("aten::_foreach_addcdiv_", 1.0, [])],
                      [("host-sync", 1.0)])  # fmt: skip
    fused = _report([("aten::mm", 5.0, ["float"]), ("aten::_fused_adamw_", 0.5, [])],
                    [("host-sync", 1.0)])  # fmt: skip
    assert [k for k, _ in applied_fixes(foreach, fused)] == ["fused_optimizer"]
    quiet = _report([("aten::mm", 5.0, ["float"]), ("aten::_foreach_addcdiv_", 1.0, [])])
    assert applied_fixes(foreach, quiet) == [("sync_less", "host-sync is gone")]
    # a smaller host-sync is no sign (compile also shortens the syncs' wait)
    less = _report([("aten::mm", 5.0, ["float"])], [("host-sync", 0.4)])
    assert applied_fixes(foreach, less) == []


def test_dropping_data_parallel_inferred_from_its_finding():
    """The CIFAR ResNet-18 in nn.DataParallel on one GPU: its finding (0.43 ms/step) gone
    after the wrapper is dropped; still there, nothing is inferred."""
    ops = [("aten::cudnn_convolution", 5.0, ["float"])]
    before = _report(ops, [("data-parallel-one-gpu", 0.43)], [("drop_data_parallel", 0.43)])
    assert applied_fixes(before, _report(ops)) == [
        ("drop_data_parallel", "data-parallel-one-gpu is gone")
    ]
    assert applied_fixes(before, before) == []


def test_whole_step_graph_inferred_from_the_host_findings_falling():
    """The LSTM's launch-bound (1.60) and host-bound (1.34) before; a whole-step graph
    leaves a trace of replays in which neither is left. A smaller launch-bound alone, or
    both falling with inductor's kernels appearing, is another fix."""
    ops = [("aten::mm", 2.0, ["float"])]
    before = _report(ops, [("launch-bound", 1.60), ("host-bound", 1.34)], [("graph_step", 2.95)])
    graphed = _report(ops, [("launch-bound", 0.05)])
    assert applied_fixes(before, graphed) == [
        ("graph_step", "launch-bound and host-bound fell by more than half")
    ]
    partly = _report(ops, [("launch-bound", 0.05), ("host-bound", 1.2)])
    assert applied_fixes(before, partly) == []
    compiled = _report([("triton_poi_fused_add_0", 1.0, ["float"]), *ops])
    assert [k for k, _ in applied_fixes(before, compiled)] == ["compile"]


def test_tolerance_is_issue_15s():
    assert tolerance_ms(4.0) == 2.0 and tolerance_ms(-20.0) == 5.0
    assert within_tolerance(6.0, 4.0) and not within_tolerance(6.01, 4.0)
    assert within_tolerance(None, 1.5) and not within_tolerance(None, 2.5)


def test_a_fix_the_report_did_not_offer_predicts_nothing(demo):
    before = demo["input-a-pageable"]
    p = compare(before, demo["input-c-prefetch"], ["tf32"])["prediction"]
    assert p["offered"] == [] and p["predicted_ms"] == pytest.approx(
        combined([], ["tf32"]), abs=1e-9
    )
    assert "offered no tf32 (a saving of 0)" in prediction_line(p)


def test_cli_fix_flag(tmp_path, demo, capsys):
    paths = {}
    for name in ("input-a-pageable", "input-c-prefetch"):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(demo[name]))
    a, c = str(paths["input-a-pageable"]), str(paths["input-c-prefetch"])
    out = tmp_path / "cmp.json"
    assert main(["compare", a, c, "--fix", "prefetch", "--json", str(out)]) == 0
    assert "prediction: prefetch was to save" in capsys.readouterr().out
    assert json.loads(out.read_text())["prediction"]["how"] == "given"
    assert main(["compare", a, c, "--fix", "compile,warp_speed"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown remedy warp_speed" in err[0]


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda r: r.update(remedies=[{"remedy": 3}]), "remedies[0].remedy"),
        (lambda r: r.update(remedies=["x"]), "remedies[0]"),
        (lambda r: r["findings"][0].update(evidence=[1]), "findings[0].evidence"),
        (lambda r: r.update(idle_breakdown={"launch": -1.0}), "idle_breakdown.launch"),
        (lambda r: r["ops"][0].update(dtypes="float"), "ops[0].dtypes"),
    ],
)
def test_bad_prediction_fields_refused(demo, tmp_path, edit, field):
    r = copy.deepcopy(demo["input-a-pageable"])
    edit(r)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(r))
    with pytest.raises(BadInput, match=field.replace("[", r"\[").replace("]", r"\]")):
        load_report(path)


def test_report_says_how_to_check_a_prediction(capsys):
    """Under the ranked fixes the report says how to check one on the user's own run."""
    trace = FIXTURES / "h100_samecall_dcgan" / "trace.json.gz"
    assert main(["analyze", str(trace), "--ceilings",
                 str(FIXTURES / "h100_samecall_ceilings.json")]) == 0  # fmt: skip
    text = " ".join(capsys.readouterr().out.split())
    assert "fixes ranked by what they save" in text
    assert "`membound compare BEFORE.json AFTER.json` checks what it saved" in text
