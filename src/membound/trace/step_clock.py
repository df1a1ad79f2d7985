"""membound's own step timer: the host's clock at every step boundary, nothing else (no sync,
no profiler), so the steps that run without the profiler are timed as the user runs them.

Step `s` (0-based) runs from boundary `s` to boundary `s + 1`; boundary 0 is when the capture
starts. The capture's schedule names the phases: `wait` steps unprofiled (the first is
warm-up — compilation, autotuning, allocator growth — and is not timed), `warmup` steps
profiled and discarded, `steps` profiled and recorded, then up to `after` steps unprofiled
again. A host timestamp measures the host's step period; in a loop that never syncs, the host
runs ahead of the GPU only until the launch queue fills, so in steady state its period is the
GPU's (the median over steps is the figure reported; the first timed step may still carry
warm-up).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

#: phases of a capture, in order
PHASES = ("unprofiled", "profiled", "after")


@dataclass
class StepClock:
    wait: int
    warmup: int
    steps: int
    after: int
    #: profiled steps after the recorded ones, timed in no phase (the ops pass)
    extra: int = 0
    times: list[float] = field(default_factory=list)  # perf_counter() at each boundary

    def start(self) -> None:
        self.times = [time.perf_counter()]

    def mark(self) -> int:
        """Record a boundary; returns it in `time.perf_counter_ns` units."""
        t = time.perf_counter_ns()
        self.times.append(t / 1e9)
        return t

    def restart(self) -> None:
        """The step after the last boundary starts now: membound's own work at that boundary
        (stopping the profiler, writing the trace) is no part of it."""
        self.times[-1] = time.perf_counter()

    def phase(self, s: int) -> str | None:
        """The phase of step `s`, None for steps that are not timed."""
        recording = self.wait + self.warmup
        if 1 <= s < self.wait:
            return "unprofiled"
        if recording <= s < recording + self.steps:
            return "profiled"
        done = recording + self.steps + self.extra
        if done <= s < done + self.after:
            return "after"
        return None

    def durations_ms(self) -> dict[str, list[float]]:
        """Milliseconds of every complete timed step, by phase."""
        out: dict[str, list[float]] = {p: [] for p in PHASES}
        for s in range(len(self.times) - 1):
            p = self.phase(s)
            if p is not None:
                out[p].append(round((self.times[s + 1] - self.times[s]) * 1e3, 4))
        return out


def median_or_none(values: list[float]) -> float | None:
    return statistics.median(values) if values else None
