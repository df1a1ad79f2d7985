"""The README's figures for the traces the package ships are what `membound analyze` and
`membound demo` give for them today (issue 18: 4.30 under analyze, 5.14 in the demo and 4.58
in the README for one trace, depending on which ceilings were found)."""

from __future__ import annotations

import re

import pytest

from membound.analysis import analyze
from membound.demos import recorded_ceilings, recorded_trace
from membound.report.terminal import summary_line
from support.paths import ROOT

README = (ROOT / "README.md").read_text()
ROWS = {"pageable-copy": "pageable_copy", "blocking-copy": "blocking_copy", "healthy": "healthy"}


@pytest.mark.parametrize("scenario", list(ROWS))
def test_readme_rows_of_the_shipped_traces(scenario):
    by_analyze = analyze(recorded_trace(scenario))  # ceilings found beside the shipped trace
    by_demo = analyze(recorded_trace(scenario), recorded_ceilings())
    assert summary_line(by_analyze) == summary_line(by_demo)
    assert by_analyze.ceilings_origin == "h200-ceilings.json beside the trace"
    row = next(line for line in README.splitlines() if line.startswith(f"| {ROWS[scenario]}"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    a = by_analyze
    assert cells[1] == f"{a.median_step_ms:.2f}"
    assert cells[2] == f"{a.gpu_busy_fraction:.0%}"
    top = a.findings[0]
    share = max(a.findings, key=lambda f: f.time_lost_ms_per_step).share_of_step
    assert cells[5] == f"{share:.0%}"
    if scenario == "healthy":
        assert f"({top.code} {top.time_lost_ms_per_step:.2f})" in cells[3]
    else:
        assert (cells[3], cells[4]) == (top.code, f"{top.time_lost_ms_per_step:.2f}")


def test_readme_walkthrough_quotes_the_shipped_pageable_copy_trace():
    line = summary_line(analyze(recorded_trace("pageable-copy")))
    assert re.search(re.escape(line), README), line
