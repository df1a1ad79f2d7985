"""Placing work on the roofline: is it memory- or compute-bound, and how close to its roof?

`place(flops, bytes, seconds, ceilings, compute)` is the arithmetic for one piece of work.
`measure(fn, *args)` does it for every aten op of one function call ("locate the bottleneck
first", for one function):

    table = membound.roofline.measure(torch.nn.functional.layer_norm, x, (4096,))
    table.print()                       # rich table, slowest op first
    rows = table.to_rows()              # the report JSON's `ops` rows
    draw(table.ceilings, table.points(), "ln.png")   # membound.report.roofline_chart

How `measure` works, and why: it runs `fn` once to warm up (lazy init, autotuning, caching
allocator), then `RUNS` times under `torch.profiler` with `record_shapes=True`, exports the
profile as a kineto trace, loads it with `membound.trace.load` and joins ops, kernels and
costs with `membound.analysis.ops` — the very code `membound analyze` runs on a training
trace, so an op is costed the same way in both (the profiler's Python `FunctionEvent`
fields, e.g. `input_dtypes`, differ between torch versions; the trace file's do not).
Which ops own time:
  - CUDA: each kernel belongs to the innermost op the cost model knows among the ops that
    enclose its launch (`aten::native_layer_norm`, not the wrapper `aten::layer_norm`).
  - CPU: the outermost op the cost model knows, timed by its host time (its helpers
    `aten::empty`/`aten::view` included); ops it does not know are descended into.
Figures are per call of `fn` (totals divided by `RUNS`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from membound.device.ceilings import Ceilings
from membound.errors import BadInput

#: profiled repetitions of `fn` in `measure` (after one warm-up call)
RUNS = 3

#: cost families whose fp32 math runs on tensor cores when TF32 is allowed
_TF32_FAMILIES = frozenset(
    {"matmul", "mm", "bmm", "addmm", "linear", "gemm", "conv", "convolution", "attention", "sdpa"}
)


@dataclass
class Placement:
    """Where one piece of work sits on a device's roofline."""

    intensity: float  # FLOP per byte moved
    achieved_flops: float  # FLOP/s
    achieved_bandwidth: float  # bytes/s
    bound: str  # "memory" | "compute": which roof caps it at this intensity
    attainable_seconds: float  # time at the roof: max(flops / peak, bytes / bandwidth)
    fraction: float  # attainable / actual seconds, 0..1 (1 = on the roof)
    achieved_bandwidth_fraction: float  # of the measured copy bandwidth (> 1: cache-resident)
    achieved_flops_fraction: float  # of the compute ceiling for its dtype
    compute: str | None = None  # the compute-dtype key the ceiling came from
    ridge: float = math.nan  # FLOP/byte where the memory roof meets this compute roof


def place(
    flops: float, bytes: float, seconds: float, ceilings: Ceilings, compute: str | None = None
) -> Placement:
    """Place `flops` FLOPs and `bytes` bytes done in `seconds` on `ceilings`' roofline.

    `compute` is a `COMPUTE_KEYS` entry ("bf16", "tf32", "fp32_vector", ...) choosing the flat
    roof; see `matmul_compute_key` for fp32 matmuls with TF32 on.
    """
    if not seconds or seconds <= 0 or math.isnan(seconds):
        raise BadInput(
            f"cannot place work that took {seconds} s on the roofline; time must be positive"
        )
    if flops < 0 or bytes < 0:
        raise BadInput(f"FLOPs and bytes must be non-negative (got {flops}, {bytes})")
    peak = ceilings.peak_flops(compute)
    bandwidth = ceilings.memory_bandwidth
    ridge = peak / bandwidth
    if bytes > 0:
        intensity = flops / bytes
    else:
        intensity = math.inf if flops > 0 else 0.0
    attainable = max(flops / peak, bytes / bandwidth)
    return Placement(
        intensity=intensity,
        achieved_flops=flops / seconds,
        achieved_bandwidth=bytes / seconds,
        bound="memory" if intensity < ridge else "compute",
        attainable_seconds=attainable,
        fraction=min(1.0, attainable / seconds),
        achieved_bandwidth_fraction=bytes / seconds / bandwidth,
        achieved_flops_fraction=flops / seconds / peak,
        compute=compute if compute in ceilings.flops else None,
        ridge=ridge,
    )


_DTYPE_KEYS = {
    "float64": "fp64",
    "double": "fp64",
    "float32": "fp32",
    "float": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "int8": "int8",
    "uint8": "int8",
}


def matmul_compute_key(dtype: Any, allow_tf32: bool | None = None) -> str:
    """Compute-ceiling key of a matmul in `dtype` (torch.dtype or its name, "c10::BFloat16"
    too). fp32 maps to "tf32" when TF32 matmuls are allowed; `allow_tf32=None` reads
    `torch.backends.cuda.matmul.allow_tf32` now."""
    name = str(dtype).lower().removeprefix("torch.").removeprefix("c10::")
    if name.startswith("float8"):
        return "fp8"
    key = _DTYPE_KEYS.get(
        name, name if name in ("fp32", "tf32", "fp16", "bf16", "fp64", "fp8") else "fp32"
    )
    if key == "fp32":
        if allow_tf32 is None:
            allow_tf32 = tf32_allowed()
        if allow_tf32:
            return "tf32"
    return key


def tf32_allowed() -> bool:
    """Whether fp32 CUDA matmuls may use TF32 tensor cores right now."""
    import warnings

    import torch

    matmul = torch.backends.cuda.matmul
    with warnings.catch_warnings():  # torch >= 2.9 warns that this flag will move
        warnings.simplefilter("ignore")
        try:
            return bool(matmul.allow_tf32)
        except RuntimeError:  # set through the newer `fp32_precision` switch only
            return getattr(matmul, "fp32_precision", "ieee") == "tf32"


# ------------------------------------------------------------------------ per-op table
@dataclass
class RooflineRow:
    name: str
    calls: float  # per call of the measured function
    device_ms: float  # per call of the measured function
    flops: float | None
    bytes: float | None
    compute: str | None
    exact: bool
    placement: Placement | None

    @property
    def intensity(self) -> float | None:
        return self.placement.intensity if self.placement else None

    @property
    def achieved_flops(self) -> float | None:
        return self.placement.achieved_flops if self.placement else None

    @property
    def bound(self) -> str | None:
        return self.placement.bound if self.placement else None

    def to_dict(self) -> dict[str, Any]:
        """The report JSON's `ops` row (stable keys) plus the placement details."""
        p = self.placement
        return {
            "name": self.name,
            "calls": self.calls,
            "device_ms": self.device_ms,
            "flops": self.flops,
            "bytes": self.bytes,
            "arithmetic_intensity": _finite(p.intensity) if p else None,
            "bound": p.bound if p else None,
            "achieved_bandwidth_fraction": p.achieved_bandwidth_fraction if p else None,
            "achieved_flops_fraction": p.achieved_flops_fraction if p else None,
            "compute": self.compute,
            "exact": self.exact,
            "attainable_ms": p.attainable_seconds * 1e3 if p else None,
            "fraction_of_roof": p.fraction if p else None,
        }


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


@dataclass
class RooflineTable:
    """Per-op roofline of one function call, slowest op first."""

    rows: list[RooflineRow]
    ceilings: Ceilings
    device: str
    runs: int = RUNS
    notes: list[str] = field(default_factory=list)

    @property
    def total_ms(self) -> float:
        return sum(r.device_ms for r in self.rows)

    def row(self, name: str) -> RooflineRow | None:
        return next((r for r in self.rows if r.name == name), None)

    def to_rows(self) -> list[dict[str, Any]]:
        return [r.to_dict() for r in self.rows]

    def points(self) -> list[dict[str, Any]]:
        """Chart points (`membound.report.roofline_chart.draw`): one per costed op, area ∝ time."""
        return [
            {
                "label": r.name.removeprefix("aten::"),
                "intensity": r.intensity,
                "achieved_flops": r.achieved_flops,
                "size": r.device_ms,
            }
            for r in self.rows
            if r.placement
            and r.placement.intensity > 0
            and math.isfinite(r.placement.intensity)
            and r.placement.achieved_flops > 0
        ]

    def __rich__(self):
        from rich.table import Table

        t = Table(
            title=f"roofline on {self.ceilings.name} ({self.device}), per call",
            title_justify="left",
        )
        for col in (
            "op",
            "calls",
            "device ms",
            "GFLOP",
            "MB",
            "FLOP/B",
            "bound",
            "of roof",
            "of BW",
            "of FLOP/s",
        ):
            t.add_column(col, justify="left" if col in ("op", "bound") else "right")
        for r in self.rows:
            p = r.placement
            t.add_row(
                r.name,
                f"{r.calls:g}",
                f"{r.device_ms:.3f}",
                "-" if r.flops is None else f"{r.flops / 1e9:.3g}",
                "-" if r.bytes is None else f"{r.bytes / 1e6:.4g}",
                "-" if not p else ("inf" if math.isinf(p.intensity) else f"{p.intensity:.3g}"),
                "?" if not p else f"{p.bound} ({r.compute})" if p.bound == "compute" else p.bound,
                "-" if not p else f"{p.fraction:.0%}",
                "-" if not p else f"{p.achieved_bandwidth_fraction:.0%}",
                "-" if not p else f"{p.achieved_flops_fraction:.0%}",
            )
        return t

    def print(self, console=None) -> None:
        from rich.console import Console

        (console or Console()).print(self)

    def plot(self, path=None, *, title: str | None = None):
        """The roofline chart with one point per op (see `report.roofline_chart.draw`)."""
        from membound.report.roofline_chart import draw

        return draw(self.ceilings, self.points(), path, title=title)


def measure(
    fn: Callable[..., Any],
    *args: Any,
    device: str | None = None,
    ceilings: Ceilings | None = None,
    **kwargs: Any,
) -> RooflineTable:
    """Run `fn(*args, **kwargs)` under the profiler and place each aten op on the roofline.

    `device` defaults to the device of the first tensor argument (else cuda if available,
    else cpu); `ceilings` default to `get_ceilings(device)`, which measures the device once
    (tens of seconds) and caches the result.
    """
    import torch

    kind = _device_kind(device, args, kwargs)
    if ceilings is None:
        from membound.device.ceilings import get_ceilings

        ceilings = get_ceilings(kind)
    allow_tf32 = kind == "cuda" and tf32_allowed()

    fn(*args, **kwargs)  # warm-up: lazy init, autotuning, allocator growth stay out of the profile
    sync = torch.cuda.synchronize if kind == "cuda" else (lambda: None)
    sync()
    activities = [torch.profiler.ProfilerActivity.CPU]
    if kind == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
        for _ in range(RUNS):
            fn(*args, **kwargs)
        sync()
    return table_from_trace(_export(prof), ceilings, kind, allow_tf32)


def _export(prof):
    """The profile as a loaded `membound.trace.load.Trace`, through its kineto JSON: the
    same file format `membound analyze` reads, so both take one code path."""
    import os
    import tempfile

    from membound.trace.load import load_trace

    with tempfile.TemporaryDirectory(prefix="membound-measure-") as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        return load_trace(path)


def table_from_trace(trace, ceilings: Ceilings, kind: str, allow_tf32: bool) -> RooflineTable:
    """The per-op table of a trace holding `RUNS` calls of the measured function.

    CUDA: each kernel joined to the innermost op the cost model knows that launched it
    (`membound.analysis.ops.join_calls`, as in `membound analyze`); CPU: the outermost
    known ops, timed by host time (`membound.analysis.ops.cpu_calls`)."""
    from membound.analysis.ops import cpu_calls, join_calls

    calls = join_calls(trace) if kind == "cuda" else cpu_calls(trace)
    return _aggregate(calls, ceilings, kind, allow_tf32)


def _device_kind(device: str | None, args: tuple, kwargs: dict) -> str:
    import torch

    if device is not None:
        try:
            kind = torch.device(device).type
        except (RuntimeError, TypeError):
            raise BadInput(f"unknown device {device!r}; use 'cuda' or 'cpu'") from None
    else:
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        kind = (
            tensors[0].device.type if tensors else ("cuda" if torch.cuda.is_available() else "cpu")
        )
    if kind not in ("cuda", "cpu"):
        raise BadInput(f"membound.roofline.measure supports cuda and cpu tensors, not {kind!r}")
    return kind


def _aggregate(
    calls: Iterable[Any], ceilings: Ceilings, kind: str, allow_tf32: bool
) -> RooflineTable:
    """Rows per op name from `membound.analysis.ops.OpCall`s, per call of the function."""
    groups: dict[str, dict[str, Any]] = {}
    for c in calls:
        g = groups.setdefault(
            c.name,
            {"calls": 0, "us": 0.0, "flops": 0.0, "bytes": 0.0, "costed": 0, "compute": {}},
        )
        g["calls"] += 1
        g["us"] += c.device_us
        if not c.known:
            continue
        g["costed"] += 1
        g["flops"] += c.flops
        g["bytes"] += c.bytes
        key = _compute_key(c, allow_tf32)
        g["compute"][key] = g["compute"].get(key, 0.0) + c.device_us
    rows = []
    for name, g in groups.items():
        seconds = g["us"] / 1e6 / RUNS
        compute = max(g["compute"], key=g["compute"].get) if g["compute"] else None
        flops = g["flops"] / RUNS if g["costed"] else None
        nbytes = g["bytes"] / RUNS if g["costed"] else None
        placement = None
        if g["costed"] and seconds > 0 and (flops or nbytes):
            placement = place(flops, nbytes, seconds, ceilings, compute)
        rows.append(
            RooflineRow(
                name,
                g["calls"] / RUNS,
                seconds * 1e3,
                flops,
                nbytes,
                compute,
                g["costed"] == g["calls"],
                placement,
            )
        )
    rows.sort(key=lambda r: r.device_ms, reverse=True)
    return RooflineTable(rows, ceilings, kind)


def _compute_key(call, allow_tf32: bool) -> str | None:
    """The call's compute key; an fp32 matmul-family call without kernel-name evidence
    (`join_calls` already says "tf32" when its kernels used tensor cores) uses the TF32 roof
    when TF32 was allowed while it ran."""
    key = call.compute
    if key == "fp32" and allow_tf32 and str(call.family).lower() in _TF32_FAMILIES:
        return "tf32"
    return key


def placement_dict(p: Placement) -> dict[str, Any]:
    return asdict(p)
