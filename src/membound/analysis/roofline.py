"""Placing work on the roofline: is it memory- or compute-bound, and how close to its roof?

`place(flops, bytes, seconds, ceilings, compute)` is the arithmetic for one piece of work;
`memory_roof` picks the slanted roof it is held to (HBM's copy rate; L2's for calls whose
bytes fit in L2; the write rate for fills), `call_compute_key` the flat roof an op call is
held to (its dtype, TF32 for fp32 matmuls where TF32 was on); `chart_points` turns op rows
into the points a roofline chart draws. `analysis.ops.op_rows` places every op of a trace with these, and so does
`membound.roofline.measure` for one function.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from membound.cost.formulas.inductor import parse_name
from membound.dtypes import COMPUTE_KEY_NAMES, canonical, compute_key
from membound.errors import BadInput

#: cost families whose fp32 math runs on tensor cores when TF32 is allowed
TF32_FAMILIES = frozenset(
    {"matmul", "mm", "bmm", "addmm", "linear", "gemm", "conv", "convolution", "attention", "sdpa"}
)


#: the memory roofs work can be held to: "dram" (the HBM copy rate, `Ceilings.memory_bandwidth`),
#: "l2" (`Ceilings.l2_bandwidth`), "write" (`Ceilings.write_bandwidth`), and "mixed" for an
#: op whose calls are held to different ones (some fit in L2, some do not)
MEMORY_ROOFS = ("dram", "l2", "write", "mixed")
#: a call is held to the L2 roof when its minimal bytes are at most this share of the L2 size:
#: all of it, since the ops issue 16 found above the HBM roof on an H200 (60 MiB of L2) moved
#: 16 to 55 MB per call (ReLU forward and backward, pow, mul)
L2_FIT = 1.0
#: cost families that only write (fills, zeros, random generators): held to the write rate
WRITE_FAMILIES = frozenset({"fill"})


def call_memory_roof(ceilings, nbytes: float, family: str | None = None) -> tuple[str, float]:
    """(roof name, bytes/s) of one call moving `nbytes` minimal bytes: L2's when its bytes fit
    (`L2_FIT` of `l2_bytes`) and the ceilings have an L2 rate, the write rate for a
    `WRITE_FAMILIES` op when they have one, else the HBM copy rate. A roof is used only where
    it is above the HBM copy's (a measurement below it did not see what it meant to)."""
    dram = float(ceilings.memory_bandwidth)
    l2 = getattr(ceilings, "l2_bandwidth", None)
    l2_bytes = getattr(ceilings, "l2_bytes", None)
    if l2 and l2_bytes and 0 < nbytes <= L2_FIT * l2_bytes and l2 > dram:
        return "l2", float(l2)
    write = getattr(ceilings, "write_bandwidth", None)
    if write and family in WRITE_FAMILIES and write > dram:
        return "write", float(write)
    return "dram", dram


def memory_roof(
    ceilings, call_bytes: Iterable[float], family: str | None = None
) -> tuple[str, float]:
    """(roof name, bytes/s) of work done as calls of `call_bytes` minimal bytes each (one op's
    calls: `call_memory_roof` for each). Calls held to different roofs: "mixed", at the rate
    Σ bytes ÷ Σ (bytes ÷ each call's roof), so the time at the roof is each call's own. Work
    without bytes is held to HBM's."""
    dram = float(ceilings.memory_bandwidth)
    if not getattr(ceilings, "l2_bandwidth", None) and not getattr(
        ceilings, "write_bandwidth", None
    ):
        return "dram", dram  # the common case: no per-call work
    total = seconds = 0.0
    rates: dict[str, float] = {}
    for nbytes in call_bytes:
        if nbytes <= 0:
            continue
        name, rates[name] = call_memory_roof(ceilings, nbytes, family)
        total += nbytes
        seconds += nbytes / rates[name]
    if not total:
        return "dram", dram
    if len(rates) == 1:
        return next(iter(rates.items()))
    return "mixed", total / seconds


@dataclass
class Placement:
    """Where one piece of work sits on a device's roofline."""

    intensity: float  # FLOP per byte moved
    achieved_flops: float  # FLOP/s
    achieved_bandwidth: float  # bytes/s
    bound: str  # "memory" | "compute": which roof caps it at this intensity
    attainable_seconds: float  # time at the roof: max(flops / peak, bytes / bandwidth)
    fraction: float  # attainable / actual seconds, 0..1 (1 = on the roof)
    achieved_bandwidth_fraction: float  # of its memory roof (`memory_roof`)
    achieved_flops_fraction: float  # of the compute ceiling for its dtype
    compute: str | None = None  # the compute-dtype key the ceiling came from
    ridge: float = math.nan  # FLOP/byte where the memory roof meets this compute roof
    memory_roof: str = "dram"  # `MEMORY_ROOFS`: which rate `memory_bandwidth` is
    memory_bandwidth: float = math.nan  # bytes/s of the memory roof it is held to


def place(
    flops: float,
    bytes: float,
    seconds: float,
    ceilings,
    compute: str | None = None,
    *,
    call_bytes: Iterable[float] | None = None,
    family: str | None = None,
) -> Placement:
    """Place `flops` FLOPs and `bytes` bytes done in `seconds` on `ceilings`' roofline.

    `compute` is a `COMPUTE_KEYS` entry ("bf16", "tf32", "fp32_vector", ...) choosing the flat
    roof; see `matmul_compute_key` for fp32 matmuls with TF32 on. The memory roof is
    `memory_roof(ceilings, call_bytes, family)`: `call_bytes` are the bytes of each call the
    work was done in (default: one call of `bytes`), `family` its cost family (fills are
    held to the write rate).
    """
    if not seconds or seconds <= 0 or math.isnan(seconds):
        raise BadInput(
            f"cannot place work that took {seconds} s on the roofline; time must be positive"
        )
    if flops < 0 or bytes < 0:
        raise BadInput(f"FLOPs and bytes must be non-negative (got {flops}, {bytes})")
    peak = ceilings.peak_flops(compute)
    roof, bandwidth = memory_roof(ceilings, [bytes] if call_bytes is None else call_bytes, family)
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
        memory_roof=roof,
        memory_bandwidth=bandwidth,
    )


def matmul_compute_key(dtype: Any, allow_tf32: bool | None = None) -> str:
    """Compute-ceiling key of a matmul in `dtype` (torch.dtype, any name `cost.dtypes.canonical`
    reads, or a key such as "bf16"). fp32 maps to "tf32" when TF32 matmuls are allowed;
    `allow_tf32=None` reads `torch.backends.cuda.matmul.allow_tf32` now."""
    text = str(dtype).lower()
    if text in COMPUTE_KEY_NAMES:
        key = text
    else:
        name = canonical(dtype)
        key = compute_key(name) if name else "fp32"
    if key == "fp32":
        if allow_tf32 is None:
            allow_tf32 = tf32_allowed()
        if allow_tf32:
            return "tf32"
    return key


def tf32_allowed() -> bool:
    """Whether fp32 CUDA matmuls may use TF32 tensor cores right now (imports torch)."""
    import warnings

    import torch

    matmul = torch.backends.cuda.matmul
    with warnings.catch_warnings():  # torch >= 2.9 warns that this flag will move
        warnings.simplefilter("ignore")
        try:
            return bool(matmul.allow_tf32)
        except RuntimeError:  # set through the newer `fp32_precision` switch only
            return getattr(matmul, "fp32_precision", "ieee") == "tf32"


def call_compute_key(call, allow_tf32: bool = False) -> str | None:
    """The roof an op call is held to: its cost's compute key (`join_calls` already says
    "tf32" when its kernels' names show tensor cores); an fp32 matmul-family call without
    that evidence gets the TF32 roof when TF32 was allowed while it ran."""
    key = call.compute
    if key == "fp32" and allow_tf32 and str(call.family).lower() in TF32_FAMILIES:
        return "tf32"
    return key


def chart_points(rows, limit: int | None = None) -> list[dict[str, Any]]:
    """One chart point per placed op row with FLOPs (`report.roofline_chart.draw`): label,
    intensity, achieved FLOP/s, size (its device time: marker area), slowest first."""
    out = []
    for r in rows:
        x = r.arithmetic_intensity
        if not x or not math.isfinite(x) or r.device_ms <= 0 or r.flops <= 0:
            continue
        out.append(
            {
                "label": point_label(r.name),
                "intensity": x,
                "achieved_flops": r.flops / (r.device_ms / 1e3),
                "size": r.device_ms,
            }
        )
    return out[:limit] if limit is not None else out


def point_label(name: str) -> str:
    """A chart label: an aten op without its namespace, an inductor kernel by the ops it
    fused ("fused add+native_layer_norm (red)"), anything else as named."""
    parsed = parse_name(name)
    if parsed is not None:
        kind, ops = parsed
        known = [o for o in ops if o != "?"]
        if known:
            more = " +…" if len(known) < len(ops) else ""
            return f"fused {'+'.join(dict.fromkeys(known))}{more} ({kind})"
    return name.removeprefix("aten::")
