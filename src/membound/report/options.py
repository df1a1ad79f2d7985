"""What a report shows and writes (`report.emit`'s options)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: terminal formats: rich tables and colour, the same without colour, the report JSON
FORMATS = ("rich", "plain", "json")


@dataclass(frozen=True)
class ReportOptions:
    """What `emit` shows and writes.

    `top_findings`/`top_ops`/`step_bars`: how many findings, op rows and per-step bars the
    terminal shows (None: every finding); `quiet`: no terminal report (files only, and the
    lines saying where they went); `format`: one of `FORMATS`; `json_path`, `html_path`,
    `annotated_trace_path`: files to write (the annotated trace: single-trace results only).
    """

    top_findings: int | None = None
    top_ops: int = 10
    step_bars: int = 12
    quiet: bool = False
    format: str = "rich"
    json_path: str | Path | None = None
    html_path: str | Path | None = None
    annotated_trace_path: str | Path | None = None

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, not {self.format!r}")
