"""Reports: JSON schema keys, self-contained HTML, annotated trace that loads back, terminal."""

from __future__ import annotations

import gzip
import io
import json
import re

import pytest
from rich.console import Console

from membound.analysis import analyze  # noqa: E402
from membound.report import ReportOptions, emit, json_report
from membound.trace.load import load_trace  # noqa: E402
from support import tracebuilder
from support.paths import FIXTURES as DATA


@pytest.fixture
def pipeline():
    return analyze(
        [DATA / "synthetic_input_pipeline" / "trace.json.gz"], tracebuilder.test_ceilings()
    )


@pytest.fixture
def memory():
    return analyze(
        [DATA / "synthetic_memory_block" / "trace.json.gz"], tracebuilder.test_ceilings()
    )


def test_json_has_design_schema(pipeline, tmp_path):
    emit(pipeline, ReportOptions(quiet=True, json_path=tmp_path / "r.json"))
    d = json.loads((tmp_path / "r.json").read_text())
    assert d["schema"] == 1
    assert {"device", "steps", "gpu_busy_fraction", "idle_breakdown", "findings", "ops"} <= set(d)
    assert d["device"]["name"] == "NVIDIA H200" and d["device"]["ceilings_source"] == "measured"
    assert d["steps"]["count"] == 2 and d["steps"]["median_step_ms"] == pytest.approx(5.0)
    assert d["gpu_busy_fraction"] == pytest.approx(0.42)
    assert d["idle_breakdown"]["pageable_copy"] == pytest.approx(0.91)
    f = d["findings"][0]
    assert set(f) == {
        "code",
        "title",
        "time_lost_ms_per_step",
        "expected_step_ms_after_fix",
        "share_of_step",
        "evidence",
        "fix",
        "doc",
    }
    assert f["code"] == "input-starved"


def test_json_op_rows(memory):
    d = json_report.to_dict(memory)
    keys = {
        "name",
        "calls",
        "device_ms",
        "flops",
        "bytes",
        "arithmetic_intensity",
        "bound",
        "achieved_bandwidth_fraction",
        "achieved_flops_fraction",
    }
    assert all(keys <= set(r) for r in d["ops"])
    mm = next(r for r in d["ops"] if r["name"] == "aten::mm")
    assert mm["bound"] == "compute" and mm["flops"] == 2 * 2 * 4096**3
    json.dumps(d, allow_nan=False)  # strictly valid JSON


def test_html_is_self_contained(memory, tmp_path):
    emit(memory, ReportOptions(quiet=True, html_path=tmp_path / "r.html"))
    text = (tmp_path / "r.html").read_text()
    assert text.count("<svg") == 2  # timeline + roofline
    assert "fp32-matmul" in text and "unfused-chain" in text
    assert not re.search(
        r"<script[^>]+src=|<link[^>]+href=|url\(\s*['\"]?http|src=['\"]?http|href=['\"]?http", text
    )
    assert "http" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "").replace(
        'xmlns:xlink="http://www.w3.org/1999/xlink"', ""
    )


def test_html_lists_the_fixes_its_headline_names(tmp_path):
    """The headline names the top fix; the page lists the fixes, as the terminal does, where
    one recovers two findings or more (the pageable-copy demo: pinning recovers the pageable
    and the blocking copy)."""
    from membound.demos import recorded_trace

    a = analyze(recorded_trace("pageable-copy"))
    emit(a, ReportOptions(quiet=True, html_path=tmp_path / "p.html"))
    text = (tmp_path / "p.html").read_text()
    top = a.remedies[0]
    assert f"top fix: {top.key} " in text and "<h2>Fixes</h2>" in text
    assert len(top.findings) >= 2
    row = text[text.index("<h2>Fixes</h2>") :]
    assert f"<td>{top.key}</td><td class='num'>{top.saving_ms_per_step:.3f}</td>" in row
    assert "pageable-copy (1)" in row and "membound compare" in row


def test_html_for_cpu_only_trace(tmp_path):
    a = analyze([DATA / "cpu_only" / "trace.json.gz"])
    emit(a, ReportOptions(quiet=True, html_path=tmp_path / "c.html"))
    text = (tmp_path / "c.html").read_text()
    assert "CPU-only" in text and "<svg" not in text


def test_annotated_trace_loads_back_with_finding_spans(pipeline, tmp_path):
    out = tmp_path / "ann.json.gz"
    emit(pipeline, ReportOptions(quiet=True, annotated_trace_path=out))
    doc = json.loads(gzip.open(out).read())
    spans = [
        e for e in doc["traceEvents"] if e.get("pid") == "membound findings" and e["ph"] == "X"
    ]
    assert {e["tid"] for e in spans} == {"1. input-starved", "2. pageable-copy", "3. host-sync"}
    starved = sorted((e["ts"], e["dur"]) for e in spans if e["tid"] == "1. input-starved")
    assert starved == [(0.0, 1000.0), (5000.0, 1000.0)]
    # the original events are all still there, and membound itself still reads the file
    original = load_trace(DATA / "synthetic_input_pipeline" / "trace.json.gz")
    again = load_trace(out)
    assert len(again.gpu) == len(original.gpu) and len(again.cpu) == len(original.cpu)


def test_annotated_trace_of_a_trace_without_steps_or_gpu_is_valid(tmp_path):
    p = tmp_path / "e.json"
    # one host op: no step, no GPU (an empty trace is refused by the loader now)
    p.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", '
                 '"ts": 1, "dur": 2, "pid": 1, "tid": 1}]}')  # fmt: skip
    a = analyze([p])
    out = emit(a, ReportOptions(quiet=True, annotated_trace_path=tmp_path / "e.out.json.gz"))
    assert out == [("annotated trace", tmp_path / "e.out.json.gz")]
    json.loads(gzip.open(tmp_path / "e.out.json.gz").read())


def test_terminal_report(pipeline):
    buf = io.StringIO()
    emit(pipeline, console=Console(file=buf, width=160, color_system=None))
    text = buf.getvalue()
    # 5 ms steps: 2 ms of kernels, a 0.1 ms copy alone, 2.9 ms idle
    headline = (
        "2 steps · step 5.00 ms · computing 40% · copying 2% · idle 58% · top fix: workers "
        "1.00 ms/step (20%) to gain"
    )
    assert headline in text
    assert "input-starved" in text and "pageable-copy" in text and "host-sync" in text
    # step bar: 42% busy = 21 cells, 10 cells DataLoader, 9 pageable copy
    assert "█" * 21 + "D" * 10 + "P" * 9 in text
