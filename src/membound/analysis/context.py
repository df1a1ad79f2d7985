"""`AnalysedTrace`: what every rule reads — the loaded trace, its timeline, its op calls,
the ceilings — with the per-step arithmetic rules share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from membound.analysis import intervals as iv
from membound.analysis.findings import Finding
from membound.analysis.op_calls import OpCall
from membound.analysis.result import OpRow, Step
from membound.analysis.timeline import Timeline
from membound.trace.model import H2D, PINNED, Trace

#: a pinned H2D rate to compare pageable copies against when neither the ceilings nor the
#: trace has one: a PCIe Gen4 x16 link's typical pinned rate (bytes/s)
DEFAULT_PINNED_H2D = 25e9


@dataclass
class AnalysedTrace:
    trace: Trace
    timeline: Timeline
    steps: list[Step]
    calls: list[OpCall]
    rows: list[OpRow]
    ceilings: Any | None
    notes: list[str] = field(default_factory=list)
    timing: Any = None  # `analysis.step_timing.StepTiming` of membound's capture, if any
    frameworks: tuple[str, ...] = ()  # what the script imported (lightning, transformers, ...)
    #: steps the op calls and rows cover: the ops pass's when membound captured one (its
    #: calls come from that trace), else the timeline's
    op_steps: int | None = None
    #: membound's norm kernels' measured host and GPU cost here (capture meta
    #: `norm_host_cost`, `nn.host_cost`), for `analysis.norm_whatif`; None when not measured
    norm_host_cost: dict | None = None
    #: the timeline profiler's host cost per CUDA call measured after the script (µs; the
    #: meta's `profiler_host_cost`, `trace.profiler_cost`), for `analysis.gpu_whatif`; None
    #: when not measured
    profiler_cost_us: float | None = None
    #: the host time of one plain launch measured with it (µs, `trace.profiler_cost.launch_us`),
    #: the unit of autocast's added host work in `analysis.gpu_whatif`; None when not measured
    launch_host_us: float | None = None
    #: the host work bf16 autocast added per kernel, in those launches, measured with it
    #: (`trace.profiler_cost.autocast_factor`), for `analysis.gpu_whatif`; None when not
    #: measured (its `AUTOCAST_LAUNCHES_PER_KERNEL` then)
    autocast_factor: float | None = None
    #: what pinning moves off the training thread when it drops a worker batch, measured
    #: after the script (ms per batch; the meta's `loader_host_cost`, `trace.loader_probe`),
    #: for `pageable-copy`; None when not measured
    loader_release_moved_ms: float | None = None
    #: channels_last's time over NCHW's for the trace's interpolations, measured after the
    #: script ({(op, input dims, dtype): ratio}; the meta's `layout_cost`,
    #: `trace.layout_probe`), for `memory-bound-op`; empty when not measured
    layout_ratios: dict = field(default_factory=dict)
    #: the trace's convolutions and matmuls timed again after the script as recorded, in bf16
    #: and in channels_last (the meta's `dtype_cost`, `trace.dtype_probe`), for `tf32-matmul`
    #: and `analysis.dtype_whatif`; None when not measured
    dtype_cost: dict | None = None
    #: the trace the op calls came from (membound's ops pass, with CPU ops and shapes, or
    #: the timeline trace itself); None: the timeline trace
    op_trace: Any = None
    #: a worker-fed loader's workers' CPU and the host's cores in the unprofiled phase
    #: (`analysis.loader_cpu`), for `input-starved`; None when the capture did not read them
    loader_cpu: Any = None

    @property
    def n_steps(self) -> int:
        return max(len(self.steps), 1)

    @property
    def mean_step_ms(self) -> float:
        return sum(s.wall_ms for s in self.steps) / self.n_steps if self.steps else 0.0

    @property
    def reference_step_ms(self) -> float:
        """The step savings refer to: the unprofiled one when timed, else the trace's mean."""
        return self.timing.unprofiled_median_ms if self.timing is not None else self.mean_step_ms

    @property
    def window(self) -> tuple[float, float]:
        if not self.steps:
            return (0.0, 0.0)
        return self.steps[0].start_us, self.steps[-1].end_us

    def per_step(self, total_ms: float) -> float:
        return total_ms / self.n_steps

    @property
    def n_op_steps(self) -> int:
        return max(self.op_steps or len(self.steps), 1)

    def per_op_step(self, total: float) -> float:
        """A total over the op calls / rows (`calls`, `rows`), per step."""
        return total / self.n_op_steps

    def share(self, ms_per_step: float) -> float:
        step = self.reference_step_ms
        return ms_per_step / step if step > 0 else 0.0

    def in_window(self, ts: np.ndarray) -> np.ndarray:
        """Which times fall inside one of the steps (a step left out by `analysis.clean`
        leaves a gap between its neighbours)."""
        starts = np.array([s.start_us for s in self.steps], dtype=np.float64)
        ends = np.array([s.end_us for s in self.steps], dtype=np.float64)
        return iv.inside(ts, starts, ends)

    def idle(self, cause: str) -> iv.Intervals:
        return self.timeline.idle_by_cause.get(cause, iv.EMPTY)

    def idle_ms_per_step(self, cause: str) -> float:
        return sum(s.idle_by_cause.get(cause, 0.0) for s in self.steps) / self.n_steps

    def pinned_h2d_bandwidth(self) -> tuple[float, str]:
        """Bytes/s a pinned H2D copy reaches here, and where that figure comes from."""
        c = self.ceilings
        if c is not None:
            for nb in (True, False):
                t = c.transfer("h2d", "pinned", nb)
                if t is not None and t.bandwidth > 0:
                    return float(t.bandwidth), f"{c.source} ceilings"
        gpu = self.trace.gpu
        if len(gpu):
            pinned = (gpu.direction == H2D) & (gpu.host_memory == PINNED)
            sel = pinned & (gpu.bytes > 0) & (gpu.dur > 0)
            if sel.any():
                rates = gpu.bytes[sel] / (gpu.dur[sel] * 1e-6)
                return float(np.max(rates)), "fastest pinned copy in this trace"
        return DEFAULT_PINNED_H2D, "typical PCIe Gen4 x16 pinned rate (no measurement available)"

    def memory_bandwidth(self) -> float | None:
        return float(self.ceilings.memory_bandwidth) if self.ceilings is not None else None

    def finding(
        self, code: str, title: str, lost_ms: float, evidence: dict, fix: str, spans=()
    ) -> Finding:
        """A finding of `code` saving `lost_ms` per step (its share of the step follows)."""
        return Finding(code, title, lost_ms, self.share(lost_ms), evidence, fix, list(spans))

    def expected_after(self, lost_ms: float) -> float:
        """The step a saving of `lost_ms` leaves."""
        return max(self.reference_step_ms - lost_ms, 0.0)

    def spans(self, intervals: iv.Intervals, limit: int = 2000) -> list[tuple[float, float]]:
        s, e = intervals
        return [(float(a), float(b)) for a, b in zip(s[:limit], e[:limit], strict=False)]
