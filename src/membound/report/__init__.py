"""Turning analysis results into terminal tables, JSON, HTML and an annotated trace.

`emit(result, options)` is the one call for every result: one trace's `Analysis` or the
merged `RankedAnalysis` of one trace per rank (`membound analyze`, `membound diagnose`,
`membound.profile(...).report()`). Presentation only: nothing here computes a finding.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from membound.report.options import FORMATS, ReportOptions

__all__ = ["FORMATS", "ReportOptions", "emit"]


def emit(result, options: ReportOptions | None = None, *, console=None) -> list[tuple[str, Path]]:
    """Print the terminal report (unless `options.quiet`) and write the requested files;
    returns [(what, path)] of the files written. `console`: a rich Console to print to."""
    from membound.analysis.ranks import RankedAnalysis

    options = options or ReportOptions()
    ranked = isinstance(result, RankedAnalysis)
    analysis = result.merged if ranked else result
    if not options.quiet:
        _render(result, ranked, options, console)
    written = []
    if options.json_path:
        from membound.report import json_report

        written.append(("json", json_report.write(result, options.json_path)))
    if options.html_path:
        from membound.report import html

        sections = ""
        if ranked:
            from membound.report.ranks import ranks_html

            sections = ranks_html(result)
        written.append(("html", html.write(analysis, options.html_path, sections=sections)))
    if options.annotated_trace_path and not ranked:
        from membound.report import annotate

        written.append(("annotated trace", annotate.write(analysis, options.annotated_trace_path)))
    if not options.quiet and options.format != "json" and written:
        out = console or _console(options)
        for what, path in written:
            out.print(f"wrote {what}: {path}")
    return written


def _console(options: ReportOptions):
    from rich.console import Console

    if options.format == "plain":
        return Console(no_color=True, highlight=False, emoji=False)
    return Console()


def _render(result, ranked: bool, options: ReportOptions, console) -> None:
    if options.format == "json":
        from membound.report import json_report

        sys.stdout.write(json.dumps(json_report.to_dict(result), indent=2) + "\n")
        return
    console = console or _console(options)
    if ranked:
        from membound.report.ranks import render

        render(result, console, options)
    else:
        from membound.report.terminal import render

        render(result, console, options)
