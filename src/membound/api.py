"""`membound.profile`: capture a loop, then analyze and report it, in one object.

    with membound.profile(steps=8) as p:
        for x, y in loader:
            train_step(x, y)
    analysis = p.report(html_path="report.html")

The capture itself is `membound.trace.capture.Capture` (the profiler, its schedule, the step
hooks, the written trace); this facade adds what comes after it, the analysis
(`membound.analysis`) and the report (`membound.report.emit`), so the capture layer needs
neither.
"""

from __future__ import annotations

import os
from typing import Any

from membound.errors import BadInput
from membound.trace.capture import Capture


class Profile(Capture):
    """A capture (`Capture`'s arguments: steps, wait, warmup, out, ...) that can analyze and
    report what it wrote."""

    _analysis: Any = None  # set by the first analyze()

    def analyze(self, ceilings: Any = None) -> Any:
        """Analyze the written trace (cached); capture notes are appended to `analysis.notes`.

        `ceilings=None` lets the analysis look them up by the trace's device name."""
        if self._analysis is None:
            from membound.analysis import analyze

            if not self.written:
                raise BadInput(
                    "no trace was captured: " + (self.notes[-1] if self.notes else "no steps ran.")
                )
            analysis = analyze([str(self.trace_path)], ceilings=ceilings)
            analysis.notes.extend(self.capture_notes())
            self._analysis = analysis
        return self._analysis

    def report(
        self,
        console: Any = None,
        json_path: str | os.PathLike | None = None,
        html_path: str | os.PathLike | None = None,
        annotated_trace_path: str | os.PathLike | None = None,
        ceilings: Any = None,
        options: Any = None,
    ) -> Any:
        """Analyze the trace and present it (terminal, and JSON/HTML/annotated trace if asked);
        `options` (a `membound.report.ReportOptions`) replaces the path arguments."""
        import dataclasses

        from membound.outputs import output_file
        from membound.report import ReportOptions, emit

        if options is None:
            options = ReportOptions()
        paths = {
            "json_path": json_path,
            "html_path": html_path,
            "annotated_trace_path": annotated_trace_path,
        }
        options = dataclasses.replace(options, **{k: v for k, v in paths.items() if v})
        checked = {  # BadInput with one sentence now, not an OSError after the analysis
            "json_path": output_file(options.json_path, "json_path"),
            "html_path": output_file(options.html_path, "html_path"),
            "annotated_trace_path": output_file(
                options.annotated_trace_path, "annotated_trace_path", folder_ok=True
            ),
        }
        options = dataclasses.replace(options, **checked)
        analysis = self.analyze(ceilings)
        if console is False:  # the old spelling of quiet
            options, console = dataclasses.replace(options, quiet=True), None
        emit(analysis, options, console=console)
        return analysis


#: `membound.profile(steps=8, wait=6, warmup=2, out=None, record_shapes=True, activities=None,
#: stop_after_capture=False, api_records="launches", cupti_buffers="shared")`: profile `steps`
#: training steps after skipping `wait` + `warmup` ones (`api_records="launches"`: the
#: timeline pass records only the CUDA calls membound reads; "all": every one;
#: `cupti_buffers="per-thread"`: CUPTI's per-thread activity buffers; docs/capture.md). Use as
#: ``with membound.profile(steps=8) as p: <loop>`` then ``p.report()``.
#: Steps are found from optimizer steps or DataLoader batches, or call `membound.step()` once
#: per iteration. The trace goes to ``out/trace.json.gz`` (``out`` defaults to a fresh
#: temporary directory).
profile = Profile
