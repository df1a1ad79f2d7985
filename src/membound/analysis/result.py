"""The plain data an analysis returns; `report/` presents it, nothing here draws."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from membound.analysis.findings import Finding

#: why the GPU sat idle, in the order a gap instant is attributed (first match wins) ...
#: `queued` first: a gap before work the GPU already had is its own turnaround, whatever the
#: host was doing then (`analysis.timeline`)
ATTRIBUTED_CAUSES = ("queued", "dataloader", "pageable_copy", "copy", "sync", "launch", "other")
#: ... and the idle only the profiler added (`analysis.step_timing`): shown, never a finding
IDLE_CAUSES = (*ATTRIBUTED_CAUSES, "profiler")


def computing_fraction(walls, kernel_busy) -> float | None:
    """Share of the wall time the GPU ran kernels (copies excluded: a GPU busy copying a
    pageable batch is not computing); None without wall time. Per-step walls and kernel
    busy times in ms."""
    wall = sum(walls)
    return sum(kernel_busy) / wall if wall > 0 else None


@dataclass
class Step:
    """One training step as the GPU saw it (times in µs on the trace clock, sums in ms)."""

    index: int
    start_us: float
    end_us: float
    wall_ms: float
    busy_ms: float  # union over streams of kernels, copies, memsets
    kernel_busy_ms: float  # union of kernels only
    idle_ms: float
    idle_by_cause: dict[str, float] = field(default_factory=dict)  # IDLE_CAUSES -> ms
    kernels: int = 0
    #: the host's own step mark (the window above is on the GPU's clock: `timeline.gpu_clock`)
    host_start_us: float | None = None
    host_end_us: float | None = None
    rank: int | None = None  # [distributed] whose step, once ranks are pooled

    @property
    def host_wall_ms(self) -> float:
        """The step by the host's own marks."""
        if self.host_start_us is None or self.host_end_us is None:
            return self.wall_ms
        return (self.host_end_us - self.host_start_us) / 1e3

    @property
    def host_lead_ms(self) -> float:
        """How far the host ran ahead: the GPU started this step that much after the host."""
        return (self.start_us - self.host_start_us) / 1e3 if self.host_start_us is not None else 0.0


@dataclass
class OpRow:
    """One aten op (by name) joined to its kernels and placed on the roofline."""

    name: str
    calls: int
    device_ms: float  # kernel time of its calls, whole window
    flops: float
    bytes: float
    arithmetic_intensity: float | None
    bound: str | None  # "memory" | "compute" | None (no ceilings or no cost)
    achieved_bandwidth_fraction: float | None
    achieved_flops_fraction: float | None
    fraction_of_attainable: float | None = None
    attainable_ms: float | None = None
    compute: str | None = None  # the compute key of its ceiling ("bf16", "fp32_vector", ...)
    dtypes: list[str] = field(default_factory=list)
    exact_cost: bool = True
    share_of_gpu_time: float = 0.0
    # the roof `achieved_bandwidth_fraction` is of: "dram" | "l2" | "l2-reads" | "write" | "mixed"
    # (`analysis.roofline.MEMORY_ROOFS`), None when not placed
    memory_roof: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The report JSON's `ops` row (DESIGN's schema 1: stable keys, new ones may be added)."""
        return {
            "name": self.name,
            "calls": self.calls,
            "device_ms": self.device_ms,
            "flops": self.flops,
            "bytes": self.bytes,
            "arithmetic_intensity": self.arithmetic_intensity,
            "bound": self.bound,
            "achieved_bandwidth_fraction": self.achieved_bandwidth_fraction,
            "achieved_flops_fraction": self.achieved_flops_fraction,
            "memory_roof": self.memory_roof,
            "fraction_of_attainable": self.fraction_of_attainable,
            "compute": self.compute,
            "dtypes": self.dtypes,
            "share_of_gpu_time": self.share_of_gpu_time,
            "exact_cost": self.exact_cost,
        }

    def per(self, n: float) -> OpRow:
        """This row's totals divided by `n` (e.g. per call of a function profiled n times);
        ratios (intensity, fractions, shares) are unchanged."""
        return dataclasses.replace(
            self,
            calls=self.calls / n,
            device_ms=self.device_ms / n,
            flops=self.flops / n,
            bytes=self.bytes / n,
            attainable_ms=None if self.attainable_ms is None else self.attainable_ms / n,
        )


@dataclass
class Analysis:
    """Everything `membound analyze` found in one trace."""

    trace_path: str
    device_name: str | None
    has_gpu: bool
    ceilings: Any | None  # membound.device.ceilings.Ceilings
    ceilings_source: str | None  # "measured" | "datasheet" | None
    ceilings_note: str | None
    steps: list[Step]
    gpu_busy_fraction: float | None
    idle_breakdown: dict[str, float]  # cause -> ms per step (mean)
    ops: list[OpRow]
    findings: list[Finding]
    notes: list[str] = field(default_factory=list)
    step_marked: bool = True
    #: membound's own step timer (`analysis.step_timing.StepTiming`), None for traces
    #: captured elsewhere
    timing: Any = None
    #: where the ceilings came from: "given" (--ceilings), "<file> beside the trace", "this
    #: machine's cache", "the datasheet"
    ceilings_origin: str | None = None
    #: DataLoader samples per step, as membound's capture counted them (None: unknown)
    samples_per_step: float | None = None
    #: the step's saving against kernel time removed (`analysis.gpu_whatif.curve`; None:
    #: not replayed)
    gpu_whatif: dict | None = None

    @property
    def unprofiled_step_ms(self) -> float | None:
        return self.timing.unprofiled_median_ms if self.timing is not None else None

    @property
    def profiled_step_ms(self) -> float | None:
        return self.timing.profiled_median_ms if self.timing is not None else None

    @property
    def profiler_overhead_fraction(self) -> float | None:
        return self.timing.overhead_fraction if self.timing is not None else None

    @property
    def step_shares(self) -> dict[str, float] | None:
        """Where the reference step goes: `computing` (kernels running), `copying` (copies or
        memsets and no kernel), `idle` (the rest), fractions adding up to 1; None for CPU-only
        traces. A GPU busy copying a pageable batch is busy, not computing."""
        if not self.has_gpu or not self.steps:
            return None
        n, step = len(self.steps), self.reference_step_ms
        if step <= 0:
            return None
        computing = min(sum(s.kernel_busy_ms for s in self.steps) / n / step, 1.0)
        copying = sum(max(s.busy_ms - s.kernel_busy_ms, 0.0) for s in self.steps) / n / step
        copying = min(copying, 1.0 - computing)
        return {"computing": computing, "copying": copying, "idle": 1.0 - computing - copying}

    @property
    def remedies(self) -> list:
        """Fixes ranked by what they save (`analysis.remedies`): the findings grouped by the
        one change that recovers them, each finding counted once per remedy."""
        from membound.analysis.remedies import remedies

        step = self.reference_step_ms if self.steps else None
        return remedies(self.findings, step, self.gpu_whatif)

    @property
    def reference_step_ms(self) -> float:
        """The step every ms/step refers to: the unprofiled one when it was timed, else the
        mean step of the trace."""
        u = self.unprofiled_step_ms
        return u if u is not None else self.mean_step_ms

    @property
    def median_step_ms(self) -> float:
        if not self.steps:
            return 0.0
        walls = sorted(s.wall_ms for s in self.steps)
        return (
            walls[len(walls) // 2]
            if len(walls) % 2
            else 0.5 * (walls[len(walls) // 2 - 1] + walls[len(walls) // 2])
        )

    @property
    def mean_step_ms(self) -> float:
        return sum(s.wall_ms for s in self.steps) / len(self.steps) if self.steps else 0.0

    @property
    def ops_costed_fraction(self) -> float | None:
        """Share of the GPU's device time (kernels, memsets and device copies, in the steps
        the ops came from) spent in ops that have a cost (FLOPs and bytes), so that the
        roofline places them; None without ops. Device time joined to no op counts as
        uncosted: the kernels of a CUDA-graph replay carry no op and no arguments, and on
        `examples/planted/launch_bound_graphed.py` (H200) they were 99.6% of the GPU's time
        while the op rows alone summed to one costed `aten::sum`."""
        if not sum(r.device_ms for r in self.ops):
            return None
        # a float sum of shares that add up to one can round past it
        return min(1.0, sum(r.share_of_gpu_time for r in self.ops if r.exact_cost))

    @property
    def gpu_computing_fraction(self) -> float | None:
        """Share of the steps' wall time the GPU ran kernels (None for CPU-only traces)."""
        if not self.has_gpu:
            return None
        return computing_fraction(
            [s.wall_ms for s in self.steps], [s.kernel_busy_ms for s in self.steps]
        )
