"""Issue 17: a figure that is NaN, inf or missing never crashes a report and never prints as
"nan%": the terminal (tables and list), the HTML, the JSON and the annotated trace of an
analysis poisoned with NaN in every number. (The analysis itself leaves such events out:
tests/analysis/test_hostile_traces.py; this is the presentation's own guard.)"""

from __future__ import annotations

import gzip
import io
import json
import math
import re

import pytest
from rich.console import Console

from membound.analysis import analyze
from membound.report import ReportOptions, annotate, emit, html, json_report, terminal
from membound.trace.capture_meta import timeline_in
from support import tracebuilder
from support.paths import FIXTURES

NAN = math.nan


def _poisoned(name: str):
    a = analyze([timeline_in(FIXTURES / name)], tracebuilder.test_ceilings())
    for s in a.steps:
        s.wall_ms, s.busy_ms, s.kernel_busy_ms, s.idle_ms = NAN, NAN, math.inf, NAN
        s.idle_by_cause = dict.fromkeys(s.idle_by_cause, NAN)
    for f in a.findings:
        f.time_lost_ms_per_step, f.share_of_step, f.expected_step_ms_after_fix = NAN, NAN, NAN
        f.evidence = {**f.evidence, "bad": NAN}
    for r in a.ops:
        r.device_ms, r.share_of_gpu_time, r.calls = NAN, NAN, NAN
        r.arithmetic_intensity = NAN
        r.fraction_of_attainable = r.achieved_bandwidth_fraction = NAN
    a.gpu_busy_fraction = NAN
    a.idle_breakdown = dict.fromkeys(a.idle_breakdown, NAN)
    return a


NAN_TEXT = re.compile(r"\bnan\b|\binf\b", re.I)


@pytest.fixture(params=["synthetic_input_pipeline", "synthetic_memory_block"])
def poisoned(request):
    return _poisoned(request.param)


@pytest.mark.parametrize("width, terminal_", [(200, True), (80, False)], ids=["tables", "list"])
def test_terminal_prints_dashes_not_nan(poisoned, width, terminal_):
    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=terminal_, color_system=None)
    terminal.render(poisoned, console, ReportOptions())
    out = buf.getvalue()
    assert poisoned.findings and poisoned.steps
    assert not NAN_TEXT.search(out), out
    assert "step    0        - ms" in out


def test_step_bar_of_a_nan_step_is_empty_not_a_crash(poisoned):
    # ValueError: cannot convert float NaN to integer, in _bar
    assert terminal._bar(poisoned.steps[0]).plain == ""
    s = poisoned.steps[0]
    s.wall_ms, s.busy_ms = 5.0, NAN  # a NaN part takes no cell; the rest still adds up
    assert len(terminal._bar(s, 50).plain) == 50


def test_html_prints_dashes_not_nan(poisoned, tmp_path):
    page = html.render(poisoned)
    text = re.sub(r"<svg.*?</svg>", "", page, flags=re.S)  # matplotlib's own numbers
    assert not NAN_TEXT.search(text), re.findall(r".{40}\bnan\b.{40}", text, re.I)


def test_json_has_no_nan_and_annotated_trace_is_valid_json(poisoned, tmp_path):
    json.dumps(json_report.to_dict(poisoned), allow_nan=False)
    src = timeline_in(FIXTURES / poisoned.trace_path.split("/")[-2])
    out = annotate.write(poisoned, tmp_path / "a.json.gz", source=src)
    json.loads(gzip.decompress(out.read_bytes()), parse_constant=_reject)


def _reject(name):
    raise AssertionError(f"{name} in the annotated trace")


def test_emit_all_outputs_of_a_poisoned_analysis(poisoned, tmp_path):
    buf = io.StringIO()
    emit(
        poisoned,
        ReportOptions(json_path=tmp_path / "r.json", html_path=tmp_path / "r.html"),
        console=Console(file=buf, width=120),
    )
    assert not NAN_TEXT.search(buf.getvalue())
    assert "NaN" not in (tmp_path / "r.json").read_text()
