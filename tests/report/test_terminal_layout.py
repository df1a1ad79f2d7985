"""The terminal report as a pipe, a CI log or a narrow window gets it (issue 18: 80 columns
wrapped the fix column over 15+ lines per finding, cut op names to `aten::c…`, wrapped bars)."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from membound.analysis import analyze
from membound.demos import recorded_trace
from membound.report import ReportOptions, emit


@pytest.fixture(scope="module")
def pageable():
    return analyze(recorded_trace("pageable-copy"))


def _render(analysis, width, terminal, fmt="rich"):
    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=terminal, color_system=None)
    emit(analysis, ReportOptions(format=fmt), console=console)
    return buf.getvalue()


@pytest.mark.parametrize("width", [60, 80, 99])
def test_a_pipe_gets_a_list_no_line_over_the_width_no_name_cut(pageable, width):
    text = _render(pageable, width, terminal=False)
    assert "┃" not in text and "│" not in text  # no table
    words = set(re.findall(r"\S+", text))
    for line in text.splitlines():
        # a line may only be longer if it is one unbreakable word (a path) after its indent
        assert len(line) <= width or len(line.split()) == 1, line
    for r in pageable.ops[:10]:
        assert r.name in words  # whole, never `aten::c…`
    for f in pageable.findings:
        assert any(
            line.startswith(tuple(f"{i}. {f.code}" for i in range(1, 20)))
            for line in text.splitlines()
        )
    bars = [line for line in text.splitlines() if line.lstrip().startswith("step ")]
    assert len(bars) == len(pageable.steps) and all(len(b) <= width for b in bars)


def test_a_wide_terminal_gets_tables(pageable):
    text = _render(pageable, 160, terminal=True)
    assert "┃ code" in text and "findings (ranked by the time their fix saves)" in text


def test_plain_is_the_list_even_on_a_terminal_and_json_is_the_report(pageable, capsys):
    assert "┃" not in _render(pageable, 160, terminal=True, fmt="plain")
    emit(pageable, ReportOptions(format="json"))
    out = capsys.readouterr().out
    assert out.lstrip().startswith("{") and '"schema": 1' in out


def test_the_headline_separates_computing_copying_and_idle(pageable):
    shares = pageable.step_shares
    assert sum(shares.values()) == pytest.approx(1.0)
    line = _render(pageable, 200, terminal=False).splitlines()[1]
    assert f"computing {shares['computing']:.0%}" in line and "copying" in line and "idle" in line
    assert "GPU busy" not in line  # copies count as busy: not the headline's word


def test_every_finding_links_its_page_and_every_page_exists(pageable):
    from membound.analysis.findings import DOCUMENTED
    from support.paths import ROOT

    for code in DOCUMENTED:
        assert (ROOT / "docs" / "findings" / f"{code}.md").is_file(), code
    text = _render(pageable, 100, terminal=False)
    assert "more: docs/findings/pageable-copy.md" in text


def test_html_shows_fractions_as_percent_and_links_codes(pageable, tmp_path):
    from membound.report import html

    page = html.render(pageable)
    assert "href='docs/findings/pageable-copy.md'" in page
    assert "e-0" not in page.split("<h2>Top ops</h2>")[1]  # no 7.63e-05 in the op table


@pytest.mark.parametrize(
    ("key", "saving", "said"),
    [
        ("fused_optimizer", 0.9, "no finding: the optimizer's own replay"),
        ("channels_last", -4.2, "no finding: its convolutions, matmuls and norms timed after the "
         "script (predicted to lose time here)"),
        ("bf16", 1.5, "no finding: its convolutions, matmuls and norms timed after the script"),
    ],
)  # fmt: skip
def test_a_remedy_no_finding_names_says_what_predicts_it(key, saving, said):
    from types import SimpleNamespace

    from membound.report.terminal import recovers

    r = SimpleNamespace(key=key, codes=[], findings=[], saving_ms_per_step=saving)
    assert recovers(SimpleNamespace(findings=[]), r) == said
