"""`membound.roofline.measure(fn, *args)`: every aten op of one function call on this
device's roofline ("locate the bottleneck first", for one function):

    table = membound.roofline.measure(torch.nn.functional.layer_norm, x, (4096,))
    table.print()                       # rich table, slowest op first
    rows = table.to_rows()              # the report JSON's `ops` rows
    table.plot("ln.png")                # the roofline chart, one point per op

How it works, and why: it runs `fn` once to warm up (lazy init, autotuning, caching
allocator), then `RUNS` times under `torch.profiler` with `record_shapes=True`, exports the
profile as a kineto trace, loads it with `membound.trace.load` and joins ops, kernels and
costs with `membound.analysis.ops` into the very op rows `membound analyze` reports for a
training trace (`analysis.op_rows.op_rows`), so an op is costed and placed the same way in both
(the profiler's Python `FunctionEvent` fields, e.g. `input_dtypes`, differ between torch
versions; the trace file's do not). Which ops own time:
  - CUDA: each kernel belongs to the innermost op the cost model knows among the ops that
    enclose its launch (`aten::native_layer_norm`, not the wrapper `aten::layer_norm`).
  - CPU: the outermost op the cost model knows, timed by its host time (its helpers
    `aten::empty`/`aten::view` included); ops it does not know are descended into.
Figures are per call of `fn` (totals divided by `RUNS`). The placement arithmetic itself is
`membound.analysis.roofline` (`place`, re-exported here).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from membound.analysis.op_rows import op_rows
from membound.analysis.ops import cpu_calls, join_calls
from membound.analysis.result import OpRow
from membound.analysis.roofline import (
    Placement,
    chart_points,
    matmul_compute_key,
    place,
    tf32_allowed,
)
from membound.device.ceilings import Ceilings
from membound.errors import BadInput

__all__ = [
    "RUNS",
    "Placement",
    "RooflineTable",
    "matmul_compute_key",
    "measure",
    "place",
    "table_from_trace",
    "tf32_allowed",
]

#: profiled repetitions of `fn` in `measure` (after one warm-up call)
RUNS = 3


@dataclass
class RooflineTable:
    """Per-op roofline of one function call (op rows per call of it), slowest op first."""

    rows: list[OpRow]
    ceilings: Ceilings
    device: str
    runs: int = RUNS
    notes: list[str] = field(default_factory=list)

    @property
    def total_ms(self) -> float:
        return sum(r.device_ms for r in self.rows)

    def row(self, name: str) -> OpRow | None:
        return next((r for r in self.rows if r.name == name), None)

    def to_rows(self) -> list[dict[str, Any]]:
        """The report JSON's `ops` rows (`OpRow.to_dict`)."""
        return [r.to_dict() for r in self.rows]

    def points(self) -> list[dict[str, Any]]:
        """Chart points, one per placed op (area ∝ time): `analysis.roofline.chart_points`."""
        return chart_points(self.rows)

    def __rich__(self):
        from membound.report.roofline_table import table

        return table(self)

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
        from membound.device import get_ceilings

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
    from membound.trace.kernel_args import inductor_kernel_args

    # a compiled `fn`'s inductor kernels: their parameter names say what each reads/writes
    names = inductor_kernel_args() if kind == "cuda" else {}
    return table_from_trace(_export(prof), ceilings, kind, allow_tf32, names or None)


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


def table_from_trace(
    trace,
    ceilings: Ceilings,
    kind: str,
    allow_tf32: bool,
    kernel_args: dict[str, list[str]] | None = None,
) -> RooflineTable:
    """The per-op table of a trace holding `RUNS` calls of the measured function.

    CUDA: each kernel joined to the innermost op the cost model knows that launched it
    (`analysis.ops.join_calls`, as in `membound analyze`; `kernel_args`, the launch
    parameter names of the inductor kernels this process compiled, split their bytes into
    reads and writes as diagnose's capture does); CPU: the outermost known ops, timed by
    host time (`analysis.ops.cpu_calls`). Rows are `analysis.op_rows.op_rows`, per call."""
    calls = join_calls(trace, kernel_args=kernel_args) if kind == "cuda" else cpu_calls(trace)
    total_us = sum(c.device_us for c in calls)
    rows = op_rows(calls, ceilings, total_us, allow_tf32=allow_tf32)
    return RooflineTable([r.per(RUNS) for r in rows], ceilings, kind)


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
