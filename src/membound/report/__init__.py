"""Turning analysis results into terminal tables, JSON, HTML and an annotated trace.

`emit(analysis, ...)` is the one call `membound analyze` and `membound diagnose` share.
Presentation only: nothing here computes a finding.
"""

from __future__ import annotations


def emit(
    analysis, *, console=None, json_path=None, html_path=None, annotated_trace_path=None
) -> None:
    """Print the terminal report (unless `console is False`) and write the requested files."""
    from membound.report import terminal

    if console is not False:
        terminal.render(analysis, console)
    written = []
    if json_path:
        from membound.report import json_report

        written.append(("json", json_report.write(analysis, json_path)))
    if html_path:
        from membound.report import html

        written.append(("html", html.write(analysis, html_path)))
    if annotated_trace_path:
        from membound.report import annotate

        written.append(("annotated trace", annotate.write(analysis, annotated_trace_path)))
    if console is not False and written:
        from rich.console import Console

        out = console or Console()
        for what, path in written:
            out.print(f"wrote {what}: {path}")
