"""`membound compare`: before/after report JSONs produced from real H200 traces."""

from __future__ import annotations

import json

import pytest

from membound.analysis.compare import compare, load_report
from membound.cli import main
from membound.demos import recorded_ceilings, recorded_trace
from membound.report.json_report import to_dict


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    from membound.analysis import analyze

    d = tmp_path_factory.mktemp("reports")
    ceilings = recorded_ceilings()
    out = {}
    for name in ("pageable-copy", "healthy", "input-a-pageable", "input-c-prefetch"):
        path = d / f"{name}.json"
        path.write_text(json.dumps(to_dict(analyze(recorded_trace(name), ceilings))))
        out[name] = path
    return out


def test_compare_pageable_vs_prefetch(reports):
    b = load_report(reports["input-a-pageable"])
    a = load_report(reports["input-c-prefetch"])
    cmp = compare(b, a)
    step = cmp["step_ms"]
    assert step["saved"] == pytest.approx(
        b["steps"]["median_step_ms"] - a["steps"]["median_step_ms"]
    )
    assert step["saved"] > 5  # 9.01 -> 2.49 ms per step in the H200 demo traces
    assert cmp["speedup"] == pytest.approx(step["before"] / step["after"])
    assert "pageable-copy" in cmp["resolved"]
    row = {f["code"]: f for f in cmp["findings"]}["pageable-copy"]
    assert row["after_ms"] is None and row["saved_ms"] == pytest.approx(row["before_ms"])
    kb = cmp["kernel_busy_fraction"]
    assert kb["after"] > kb["before"] + 0.3


def test_compare_cli_pageable_copy_vs_healthy(reports, tmp_path, capsys):
    rc = main(["compare", str(reports["pageable-copy"]), str(reports["healthy"]),
               "--json", str(tmp_path / "c.json")])  # fmt: skip
    assert rc == 0
    text = capsys.readouterr().out
    assert "step time" in text and "GPU busy" in text and "pageable-copy" in text
    cmp = json.loads((tmp_path / "c.json").read_text())
    assert set(cmp["resolved"]) >= {"pageable-copy", "blocking-copy"}
    # whatever is new in the healthy run is small (the healthy run has none above 10%)
    by = {f["code"]: f for f in cmp["findings"]}
    assert all(by[c]["after_ms"] < 0.1 * cmp["step_ms"]["after"] for c in cmp["new"])
    assert cmp["gpu_busy_fraction"]["after"] > cmp["gpu_busy_fraction"]["before"]


def test_findings_of_one_code_are_summed(reports):
    b = load_report(reports["healthy"])
    a = json.loads(json.dumps(b))
    a["findings"] = [
        {"code": "memory-bound-op", "time_lost_ms_per_step": 0.5},
        {"code": "memory-bound-op", "time_lost_ms_per_step": 0.25},
    ]
    cmp = compare(b, a)
    row = {f["code"]: f for f in cmp["findings"]}["memory-bound-op"]
    assert row["after_ms"] == pytest.approx(0.75) and cmp["new"] == ["memory-bound-op"]


@pytest.mark.parametrize(
    "content, words",
    [
        (None, "does not exist"),
        ("{not json", "not readable JSON"),
        ('{"a": 1}', "no 'schema'"),
        ('{"schema": 7, "steps": {}, "findings": []}', "schema 7"),
        ('{"schema": 1, "findings": []}', "lacks 'steps'"),
        ('{"schema": 1, "steps": {}, "findings": [{"code": "x"}]}', "time_lost_ms_per_step"),
    ],
)
def test_bad_files_one_line_exit_2(reports, tmp_path, capsys, content, words):
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    assert main(["compare", str(bad), str(reports["healthy"])]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err


def test_gpu_time_by_op_family_shows_what_compile_did(tmp_path, capsys):
    """The H100 DCGAN eager and compiled, recorded in one call on that call's ceilings
    (`h100_samecall_dcgan*`): compile left the convolutions as they were, turned BatchNorm
    and most elementwise time into inductor's kernels, and the families say so."""
    from membound.analysis import analyze
    from membound.device.ceilings import Ceilings
    from membound.trace.capture_meta import timeline_in
    from support.paths import FIXTURES

    ceilings = Ceilings.load(FIXTURES / "h100_samecall_ceilings.json")
    paths = []
    for name in ("h100_samecall_dcgan", "h100_samecall_dcgan_compiled"):
        doc = to_dict(analyze([timeline_in(FIXTURES / name)], ceilings))
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(doc))
    before, after = (load_report(p) for p in paths)
    fam = compare(before, after)["gpu_ms_by_family"]
    assert list(fam)[0] == "conv"  # the largest first
    assert fam["conv"]["after"] == pytest.approx(fam["conv"]["before"], rel=0.01)
    assert fam["inductor"]["before"] == 0.0 and fam["inductor"]["after"] > 0.9
    assert fam["batch_norm"]["before"] > 0.6 and fam["batch_norm"]["after"] == 0.0
    assert fam["elementwise"]["after"] < 0.25 * fam["elementwise"]["before"]
    # every family's time adds up to the ops' time a step
    steps = before["steps"]["count"]
    total = sum(r["device_ms"] for r in before["ops"]) / steps
    assert sum(v["before"] for v in fam.values()) == pytest.approx(total)
    assert main(["compare", str(paths[0]), str(paths[1])]) == 0
    text = capsys.readouterr().out
    assert "GPU time:" in text and "inductor" in text  # the label wraps on a narrow terminal
