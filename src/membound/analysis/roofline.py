"""Placing work on the roofline: is it memory- or compute-bound, and how close to its roof?

`place(flops, bytes, seconds, ceilings, compute)` is the arithmetic for one piece of work;
`memory_roof` picks the slanted roof it is held to (HBM's rate for its mix of reads and
writes, `hbm_rate`; L2's for calls whose bytes fit in L2; the write rate for fills),
`call_compute_key` the flat roof an op call is held to (its dtype, TF32 for fp32 matmuls
where TF32 was on); `chart_points` turns op rows into the points a roofline chart draws.
`analysis.op_rows.op_rows` places every op of a trace with these, and so does
`membound.roofline.measure` for one function.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from membound.cost.formulas.inductor import parse_name
from membound.dtypes import COMPUTE_KEY_NAMES, canonical, compute_key
from membound.errors import BadInput

#: cost families whose fp32 math runs on tensor cores when TF32 is allowed
TF32_FAMILIES = frozenset(
    {"matmul", "mm", "bmm", "addmm", "linear", "gemm", "conv", "convolution", "attention", "sdpa"}
)


#: the memory roofs work can be held to: "dram" (HBM's rate for the work's read share,
#: `hbm_rate`: the copy rate `Ceilings.memory_bandwidth` unless other passes were measured),
#: "l2" (`Ceilings.l2_bandwidth`), "l2-reads" (reads that fit in L2 at L2's rate, the rest
#: at HBM's: `call_memory_roof`), "write" (`Ceilings.write_bandwidth`), and "mixed" for an
#: op whose calls are held to different ones (some fit in L2, some do not)
MEMORY_ROOFS = ("dram", "l2", "l2-reads", "write", "mixed")
#: a call is held to the L2 roof when its minimal bytes are at most this share of the L2 size:
#: all of it, since the ops issue 16 found above the HBM roof on an H200 (60 MiB of L2) moved
#: 16 to 55 MB per call (ReLU forward and backward, pow, mul)
L2_FIT = 1.0
#: cost families that only write (fills, zeros, random generators): held to the write rate
WRITE_FAMILIES = frozenset({"fill"})


#: the HBM passes `device.measure` times, at the share of their bytes that are read: fill_
#: (writes only), copy (1 read : 1 write), `out = a + b` (2 : 1) and sum (reads only)
HBM_PASSES = (
    ("write_bandwidth", 0.0),
    ("memory_bandwidth", 0.5),
    ("read_mix_bandwidth", 2 / 3),
    ("read_bandwidth", 1.0),
)
#: the read share of the copy: below it, work writes more than it reads
COPY_SHARE = 0.5


def hbm_rate(ceilings, read_share: float | None) -> float:
    """Bytes/s HBM attains for traffic whose share of bytes read is `read_share` (0..1):
    piecewise linear between the measured passes of `HBM_PASSES`, holding the nearest
    measured one beyond them. From the copy up (`read_share` ≥ 0.5) a pass measured below
    the copy is not used, so the rate is never below the copy's (a measurement below it did
    not see what it meant to, as for the L2 and write roofs); below it the rate runs from the
    copy's to the write's only where the write is the faster. `read_share` None (or NaN:
    the split is unknown): the best rate measured for traffic that reads and writes, the
    copy's or the 2 : 1 mix's.

    Ceilings without the 2 : 1 pass (`read_mix_bandwidth`: files measured before it) give
    the copy rate for any share, so an older file places every op as it did when measured
    (their write pass still holds fills, `call_memory_roof`); `membound roofline --refresh`
    measures the mix."""
    copy = float(ceilings.memory_bandwidth)
    mix = getattr(ceilings, "read_mix_bandwidth", None)
    if not mix:
        return copy
    if read_share is None or math.isnan(read_share):
        return max(copy, float(mix))
    if read_share < COPY_SHARE:
        write = getattr(ceilings, "write_bandwidth", None)
        if not write or write <= copy:
            return copy
        return _between(0.0, float(write), COPY_SHARE, copy, max(read_share, 0.0))
    points = [(COPY_SHARE, copy)]
    for attr, share in HBM_PASSES:
        rate = getattr(ceilings, attr, None)
        if share > COPY_SHARE and rate and rate >= copy:
            points.append((share, float(rate)))
    for (s0, r0), (s1, r1) in zip(points, points[1:], strict=False):
        if read_share <= s1:
            return _between(s0, r0, s1, r1, read_share)
    return points[-1][1]


def _between(s0: float, r0: float, s1: float, r1: float, share: float) -> float:
    """The rate at `share` on the line from (s0, r0) to (s1, r1): r0 and r1 exactly at the
    ends."""
    t = (share - s0) / (s1 - s0)
    return r0 * (1.0 - t) + r1 * t


def copy_rate_only(ceilings) -> bool:
    """Whether every call is held to the HBM copy rate on `ceilings`: no L2 roof, and no
    other HBM pass above the copy that `call_memory_roof` uses (the common case: no per-call
    work)."""
    dram = ceilings.memory_bandwidth
    if getattr(ceilings, "l2_bandwidth", None) and getattr(ceilings, "l2_bytes", None):
        if ceilings.l2_bandwidth > dram:
            return False
    if (getattr(ceilings, "write_bandwidth", None) or 0.0) > dram:
        return False  # the fills' roof
    if not getattr(ceilings, "read_mix_bandwidth", None):
        return True  # `hbm_rate` follows no mix
    return not any((getattr(ceilings, attr, None) or 0.0) > dram for attr, _ in HBM_PASSES)


def call_memory_roof(
    ceilings,
    nbytes: float,
    family: str | None = None,
    read_share: float | None = None,
    largest_read: float | None = None,
) -> tuple[str, float]:
    """(roof name, bytes/s) of one call moving `nbytes` minimal bytes, `read_share` of them
    read (None: unknown): L2's when its bytes fit (`L2_FIT` of `l2_bytes`) and the ceilings
    have an L2 rate, the write rate for a `WRITE_FAMILIES` op when they have one, else HBM's
    for its mix of reads and writes (`hbm_rate`). The L2 and write roofs are used only where
    they are above the HBM copy's (a measurement below it did not see what it meant to).

    A call too big for L2 whose every read argument fits in it on its own (`largest_read`, the
    biggest: known for inductor kernels, by their launch parameter names, and for ATen's
    pointwise ops, by their tensor inputs: `cost.formulas.pointwise`) may find its
    inputs there, written by the kernels just before it: "l2-reads", its reads up to L2's
    size at L2's rate and the rest of its bytes at HBM's, time added. On the H100 (2026-12-05,
    `tests/fixtures/h100_samecall_dcgan_compiled`, ceilings of the same call) a compiled
    DCGAN's BatchNorm-backward reduction read three 33.5 MB fp32 tensors (100.7 MB a call,
    50 MiB of L2) at 113% of the HBM read roof, two pointwise kernels of its backward at 105%
    and 106%. A read bigger than L2 is held to HBM: streamed in order, its head has left L2
    before the call starts (a chain of such kernels timed no faster than one re-reading its
    input: `device.measure._hbm_kernel`)."""
    dram = float(ceilings.memory_bandwidth)
    l2 = getattr(ceilings, "l2_bandwidth", None)
    l2_bytes = getattr(ceilings, "l2_bytes", None)
    if l2 and l2_bytes and 0 < nbytes <= L2_FIT * l2_bytes and l2 > dram:
        return "l2", float(l2)
    if (
        l2
        and l2_bytes
        and l2 > dram
        and read_share is not None
        and largest_read is not None
        and 0 < largest_read <= L2_FIT * l2_bytes
        and family not in WRITE_FAMILIES
    ):
        reads = read_share * nbytes
        near = min(reads, float(l2_bytes))  # reads L2 may serve
        if near > 0:
            rest = nbytes - near
            share = (reads - near) / rest if rest > 0 else None
            seconds = near / float(l2) + (rest / hbm_rate(ceilings, share) if rest > 0 else 0.0)
            return "l2-reads", nbytes / seconds
    write = getattr(ceilings, "write_bandwidth", None)
    if write and family in WRITE_FAMILIES and write > dram:
        return "write", float(write)
    return "dram", hbm_rate(ceilings, read_share)


def call_rates(
    ceilings,
    nbytes: np.ndarray,
    reads: np.ndarray,
    family: str | None = None,
    largest: np.ndarray | None = None,
) -> tuple[set[str], np.ndarray]:
    """(the roof names used, bytes/s of each call's roof) of calls of one cost `family` moving
    `nbytes` minimal bytes each, `reads` of them read (NaN: unknown), `largest` the biggest
    argument each reads (NaN or None: unknown): `call_memory_roof` of each, found once per
    distinct (bytes, read share, whether every read fits in L2), so millions of calls cost a
    few sorts."""
    l2_bytes = getattr(ceilings, "l2_bytes", None)
    fits = np.zeros(np.shape(nbytes), dtype=np.int64)
    if largest is not None and l2_bytes:
        with np.errstate(invalid="ignore"):  # NaN (unknown) compares False: too big for L2
            fits = (np.asarray(largest, dtype=np.float64) <= L2_FIT * l2_bytes).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = reads / nbytes
    # an unknown share keyed as -1: each column's distinct values, then the distinct triples
    # of their codes and the fit (sorting numbers, not rows)
    sizes, size_code = np.unique(nbytes, return_inverse=True)
    shares, share_code = np.unique(np.where(np.isnan(share), -1.0, share), return_inverse=True)
    width = len(shares)
    codes, inverse = np.unique(
        (size_code.reshape(-1) * width + share_code.reshape(-1)) * 2 + fits.reshape(-1),
        return_inverse=True,
    )
    roofs = []
    for code in codes.tolist():
        pair, fit = divmod(code, 2)
        s = float(shares[pair % width])
        # the fit is all `call_memory_roof` reads of the largest read: L2's size stands in
        roofs.append(call_memory_roof(ceilings, float(sizes[pair // width]), family,
                                      s if s >= 0 else None,
                                      L2_FIT * l2_bytes if fit else None))  # fmt: skip
    rates = np.array([r for _, r in roofs], dtype=np.float64)
    return {name for name, _ in roofs}, rates[inverse.reshape(-1)]


def memory_roof(
    ceilings,
    call_bytes: Iterable[float],
    family: str | None = None,
    call_reads: Iterable[float] | None = None,
    call_largest: Iterable[float] | None = None,
) -> tuple[str, float]:
    """(roof name, bytes/s) of work done as calls of `call_bytes` minimal bytes each, of which
    `call_reads` were read (one op's calls, in the same order; NaN or None: unknown, the
    default), `call_largest` the biggest argument each read (the same; a read that fits in L2
    may come from it): `call_memory_roof` for each (`call_rates`). Calls held to different roofs:
    "mixed"; calls held to different rates (of one roof, or of several), the rate Σ bytes ÷
    Σ (bytes ÷ each call's rate), so the time at the roof is each call's own. Work without
    bytes is held to HBM's copy rate."""
    dram = float(ceilings.memory_bandwidth)
    if copy_rate_only(ceilings):
        return "dram", dram  # the common case: no per-call work
    nbytes = np.asarray(_listed(call_bytes), dtype=np.float64)
    if call_reads is None:
        reads = np.full(len(nbytes), np.nan)
    else:
        reads = np.asarray(_listed(call_reads), dtype=np.float64)
    largest = None
    if call_largest is not None:
        largest = np.asarray(_listed(call_largest), dtype=np.float64)
    moved = ~(nbytes <= 0)
    nbytes, reads = nbytes[moved], reads[moved]
    if largest is not None:
        largest = largest[moved]
    if not len(nbytes):
        return "dram", dram
    names, rates = call_rates(ceilings, nbytes, reads, family, largest)
    if len(names) == 1 and bool(np.all(rates == rates[0])):
        return names.pop(), float(rates[0])
    # summed in call order, one call at a time (as a loop over the calls adds them)
    rate = sum(nbytes.tolist()) / sum((nbytes / rates).tolist())
    return ("mixed" if len(names) > 1 else names.pop()), rate


def _listed(values: Iterable[float]):
    """`values` as numpy can read them (an array or a list stays; an iterator is listed)."""
    return values if isinstance(values, (np.ndarray, list, tuple)) else list(values)


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
    call_reads: Iterable[float] | None = None,
    call_largest: Iterable[float] | None = None,
) -> Placement:
    """Place `flops` FLOPs and `bytes` bytes done in `seconds` on `ceilings`' roofline.

    `compute` is a `COMPUTE_KEYS` entry ("bf16", "tf32", "fp32_vector", ...) choosing the flat
    roof; see `matmul_compute_key` for fp32 matmuls with TF32 on. The memory roof is
    `memory_roof(ceilings, call_bytes, family, call_reads)`: `call_bytes` are the bytes of
    each call the work was done in (default: one call of `bytes`), `call_reads` the bytes
    each read (default: unknown; HBM's rate follows the share read, `hbm_rate`), `family`
    its cost family (fills are held to the write rate).
    """
    if not seconds or seconds <= 0 or math.isnan(seconds):
        raise BadInput(
            f"cannot place work that took {seconds} s on the roofline; time must be positive"
        )
    if flops < 0 or bytes < 0:
        raise BadInput(f"FLOPs and bytes must be non-negative (got {flops}, {bytes})")
    peak = ceilings.peak_flops(compute)
    roof, bandwidth = memory_roof(
        ceilings, [bytes] if call_bytes is None else call_bytes, family, call_reads, call_largest
    )
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
