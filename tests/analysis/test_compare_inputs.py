"""`membound compare` on reports a hostile user would pass (issue 17: of 23 garbage reports, 9
gave tracebacks) and on what a new user needs to see first (issue 18: step time, throughput
and the computing share first, a warning when the workloads differ, no report against
itself, per-sample throughput only where the reports say the batch)."""

from __future__ import annotations

import copy
import json
import re

import pytest

from membound.analysis import analyze
from membound.analysis.compare import compare, load_report, validate, workload
from membound.cli import main
from membound.demos import recorded_ceilings, recorded_trace
from membound.errors import BadInput
from membound.report.json_report import to_dict
from support.tracebuilder import TraceBuilder

NAN_TEXT = re.compile(r"\bnan\b|\binf\b", re.I)


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """Report dicts of the shipped H200 traces: the same model fed three ways, and another."""
    ceilings = recorded_ceilings()
    names = ("input-a-pageable", "input-c-prefetch", "pageable-copy", "healthy")
    return {n: to_dict(analyze(recorded_trace(n), ceilings)) for n in names}


def _write(tmp_path, name, data) -> str:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(p)


def _run(capsys, *args) -> tuple[int, str, str]:
    rc = main(["compare", *map(str, args)])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _empty_report(tmp_path, zero_event: bool) -> dict:
    """The report of a trace with no events, or with one event of no duration."""
    b = TraceBuilder()
    if zero_event:
        b.annotation("nothing", 0.0, 0.0)
        path = b.write(tmp_path / "empty-trace.json")
        return to_dict(analyze([path]))
    # a trace with no events is refused by the loader now (issue 17): the report such a
    # trace gave before, as an older membound wrote it
    return {"schema": 1, "trace": "empty.json", "steps": {"count": 0, "median_step_ms": 0.0,
            "per_step": []}, "findings": [], "ops": [], "idle_breakdown": {}}  # fmt: skip


def _set(*keys):
    """A mutation setting report[k0][k1]... = value."""

    def make(value):
        def fn(r):
            node = r
            for k in keys[:-1]:
                node = node[k]
            node[keys[-1]] = value

        return fn

    return make


#: (name, the field the error must name, the mutation of a real report)
GARBAGE = [
    ("median as string", "steps.median_step_ms", _set("steps", "median_step_ms")("8.9")),
    ("median as list", "steps.median_step_ms", _set("steps", "median_step_ms")([8.9])),
    ("median negative", "steps.median_step_ms", _set("steps", "median_step_ms")(-1.0)),
    ("median 1e300", "steps.median_step_ms", _set("steps", "median_step_ms")(1e300)),
    ("median true", "steps.median_step_ms", _set("steps", "median_step_ms")(True)),
    ("steps as list", "steps", _set("steps")([1, 2])),
    ("steps as string", "steps", _set("steps")("4")),
    ("findings as dict", "findings", _set("findings")({"a": 1})),
    ("finding code as list", "findings[0].code", _set("findings", 0, "code")(["x"])),
    (
        "finding lost as string",
        "findings[0].time_lost_ms_per_step",
        _set("findings", 0, "time_lost_ms_per_step")("5"),
    ),
    ("busy as string", "gpu_busy_fraction", _set("gpu_busy_fraction")("92%")),
    ("busy above 1", "gpu_busy_fraction", _set("gpu_busy_fraction")(1.29)),
    ("shares as list", "step_shares", _set("step_shares")([0.3])),
    ("share as string", "step_shares.computing", _set("step_shares", "computing")("x")),
    ("per_step as dict", "steps.per_step", _set("steps", "per_step")({"0": 1})),
    ("per_step row as number", "steps.per_step[0]", _set("steps", "per_step", 0)(3)),
    (
        "per_step wall as string",
        "steps.per_step[0].wall_ms",
        _set("steps", "per_step", 0, "wall_ms")("1"),
    ),
    ("ops as string", "ops", _set("ops")("aten::mm")),
    ("op flops as dict", "ops[0].flops", _set("ops", 0, "flops")({})),
    ("op name null", "ops[0].name", _set("ops", 0, "name")(None)),
    ("trace nested", "trace", _set("trace")([[[["x"]]]])),
    ("device as list", "device", _set("device")(["H200"])),
    ("count negative", "steps.count", _set("steps", "count")(-4)),
    ("busy NaN literal", "gpu_busy_fraction", None),
]


@pytest.mark.parametrize("name, field, mutate", GARBAGE, ids=[g[0] for g in GARBAGE])
def test_garbage_report_is_one_line_naming_file_and_field(
    real, tmp_path, capsys, name, field, mutate
):
    report = copy.deepcopy(real["input-c-prefetch"])
    if mutate is None:  # Python's json writes NaN, and reads it back
        report = json.dumps(report).replace(
            '"gpu_busy_fraction": ', '"gpu_busy_fraction": NaN, "was": ', 1
        )
    else:
        mutate(report)
    bad = _write(tmp_path, "bad.json", report)
    good = _write(tmp_path, "good.json", real["input-a-pageable"])
    for args in ((bad, good), (good, bad)):
        rc, out, err = _run(capsys, *args)
        lines = err.strip().splitlines()
        assert rc == 2 and len(lines) == 1, (out, err)
        assert bad in lines[0] and f"'{field}'" in lines[0], lines[0]
        assert "Traceback" not in err


def test_deeply_nested_report_is_one_line(real, tmp_path, capsys):
    deep = "[" * 100_000 + "]" * 100_000
    bad = _write(tmp_path, "deep.json", '{"schema": 1, "steps": {}, "findings": ' + deep + "}")
    rc, _, err = _run(capsys, bad, _write(tmp_path, "good.json", real["healthy"]))
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "deep.json" in err


@pytest.mark.parametrize("zero_event", [False, True], ids=["no events", "a 0 µs event"])
def test_empty_trace_report_is_one_line(real, tmp_path, capsys, zero_event):
    # the report of a trace without events (it raised TypeError in compare)
    empty = _write(tmp_path, "empty.json", _empty_report(tmp_path, zero_event))
    rc, _, err = _run(capsys, empty, _write(tmp_path, "good.json", real["healthy"]))
    assert rc == 2 and "empty.json holds no steps" in err and len(err.strip().splitlines()) == 1


def test_missing_optional_sections_show_dashes_never_nan(real, tmp_path, capsys):
    r = real["input-c-prefetch"]
    bare = {"schema": 1, "steps": {"count": 4, "median_step_ms": 3.0}, "findings": []}
    rc, out, err = _run(
        capsys, _write(tmp_path, "bare.json", bare), _write(tmp_path, "full.json", r)
    )
    assert rc == 0, err
    assert not NAN_TEXT.search(out)
    busy = next(line for line in out.splitlines() if "GPU busy" in line)
    assert " - " in busy
    # a report from an older membound: NaN written as null everywhere it may be
    nulls = copy.deepcopy(r)
    nulls["gpu_busy_fraction"] = nulls["gpu_computing_fraction"] = nulls["step_shares"] = None
    rc, out, _ = _run(
        capsys, _write(tmp_path, "nulls.json", nulls), _write(tmp_path, "bare.json", bare)
    )
    assert rc == 0 and not NAN_TEXT.search(out)


def test_a_report_against_itself_is_refused(real, tmp_path, capsys):
    path = _write(tmp_path, "r.json", real["healthy"])
    rc, _, err = _run(capsys, path, path)
    assert rc == 2 and f"{path} is given twice" in err
    copy_ = _write(tmp_path, "copy.json", real["healthy"])
    rc, _, err = _run(capsys, path, copy_)
    assert rc == 2 and "hold the same report" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(BadInput, match="the two reports hold the same report"):
        compare(real["healthy"], copy.deepcopy(real["healthy"]))


def test_table_leads_with_step_time_throughput_and_computing(real, tmp_path, capsys):
    rc, out, _ = _run(
        capsys,
        _write(tmp_path, "a.json", real["input-a-pageable"]),
        _write(tmp_path, "c.json", real["input-c-prefetch"]),
    )
    assert rc == 0
    rows = [line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│")]
    assert rows[:3] == [
        "step time (ms, trace median)",
        "throughput (steps/s)",
        "GPU computing (share of step)",
    ]
    # the same model and loader fed two ways: the same work, no warning; nothing per sample
    assert "warning" not in out and "samples/s" not in out


def test_throughput_figures(real):
    cmp = compare(real["input-a-pageable"], real["input-c-prefetch"])
    step, rate = cmp["step_ms"], cmp["throughput"]["steps_per_s"]
    assert rate["before"] == pytest.approx(1e3 / step["before"])
    assert rate["after"] == pytest.approx(1e3 / step["after"])
    assert cmp["throughput"]["samples_per_s"] == {"before": None, "after": None}
    assert cmp["step_shares"]["computing"]["before"] == pytest.approx(
        real["input-a-pageable"]["step_shares"]["computing"]
    )
    assert cmp["workload"]["warning"] is None


def test_per_sample_throughput_where_the_batch_is_known(real, tmp_path, capsys):
    b, a = copy.deepcopy(real["input-a-pageable"]), copy.deepcopy(real["input-c-prefetch"])
    b["steps"]["samples_per_step"], a["batch_size"] = 64, 64
    cmp = compare(b, a)
    rates = cmp["throughput"]["samples_per_s"]
    assert rates["before"] == pytest.approx(64e3 / cmp["step_ms"]["before"])
    assert rates["after"] == pytest.approx(64e3 / cmp["step_ms"]["after"])
    rc, out, _ = _run(capsys, _write(tmp_path, "b.json", b), _write(tmp_path, "a.json", a))
    assert rc == 0 and "throughput (samples/s)" in out and "warning" not in out


def test_a_different_batch_warns_in_one_line(real, tmp_path, capsys):
    # batch 32 vs 64 gave "-57.5 ms (0.79x)" with no word that the work per step doubled
    b, a = copy.deepcopy(real["input-a-pageable"]), copy.deepcopy(real["input-c-prefetch"])
    b["samples_per_step"], a["samples_per_step"] = 32, 64
    w = workload(b, a)
    assert w["differences"] == ["32 vs 64 samples per step"]
    rc, out, _ = _run(capsys, _write(tmp_path, "b.json", b), _write(tmp_path, "a.json", a))
    lines = [line for line in out.splitlines() if line.startswith("warning:")]
    assert len(lines) == 1 and "32 vs 64 samples per step" in lines[0]


def test_a_different_model_warns_with_op_set_and_flops(real):
    w = workload(real["pageable-copy"], real["healthy"])
    assert any(
        d.startswith("ops only before: aten::convolution_backward") for d in w["differences"]
    )
    assert any(d.startswith("FLOPs per step") for d in w["differences"])
    assert w["warning"].startswith("the two runs may not do the same work per step: ")


def test_flops_bytes_and_step_count_changes(real):
    b = real["input-a-pageable"]
    a = copy.deepcopy(b)
    a["trace"] = "other"
    for r in a["ops"]:
        r["flops"] *= 1.2
    assert workload(b, a)["differences"] == ["FLOPs per step +20%"]
    a = copy.deepcopy(b)
    for r in a["ops"]:
        r["bytes"] *= 0.98  # within a few %: the same work
    assert workload(b, a)["differences"] == []
    a["steps"]["count"] = b["steps"]["count"] + 2
    assert (
        workload(b, a)["differences"][0]
        == f"{b['steps']['count']} vs {a['steps']['count']} steps captured"
    )


def test_unprofiled_step_is_the_basis_when_both_have_it(real):
    b, a = copy.deepcopy(real["input-a-pageable"]), copy.deepcopy(real["input-c-prefetch"])
    b["steps"]["unprofiled_median_ms"], a["steps"]["unprofiled_median_ms"] = 8.0, 2.0
    cmp = compare(b, a)
    assert cmp["step_ms"] == {"before": 8.0, "after": 2.0, "saved": 6.0, "basis": "unprofiled"}
    a["steps"]["unprofiled_median_ms"] = None
    assert compare(b, a)["step_ms"]["basis"] == "trace median"


def test_validate_accepts_every_shipped_report(real):
    for r in real.values():
        assert validate(r) is r


def test_loaded_report_keeps_its_path(real, tmp_path):
    path = _write(tmp_path, "r.json", real["healthy"])
    r = load_report(path)
    assert r == real["healthy"] and str(r.path) == path


def test_comparison_json_is_strict_json(real, tmp_path, capsys):
    # FLOPs from none (a run whose ops had no cost) is no Infinity in --json
    b = copy.deepcopy(real["input-a-pageable"])
    for r in b["ops"]:
        r["flops"] = 0.0
    cmp = compare(b, real["input-c-prefetch"])
    assert "FLOPs per step from none" in cmp["workload"]["warning"]
    json.dumps(cmp, allow_nan=False)
    out = tmp_path / "c.json"
    rc, _, _ = _run(
        capsys,
        _write(tmp_path, "b.json", b),
        _write(tmp_path, "a.json", real["input-c-prefetch"]),
        "--json",
        out,
    )
    assert rc == 0
    json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in --json"))
