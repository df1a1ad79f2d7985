"""Op rows: `analysis.ops.join_calls`' calls aggregated by op name and placed on the
roofline (`analysis.roofline.place`), and the note for ops that ran above a ceiling."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from membound.analysis.op_calls import OpCall, call_column, value_codes
from membound.analysis.result import OpRow
from membound.analysis.roofline import call_compute_key, place


def op_rows(
    calls: list[OpCall], ceilings, gpu_time_us: float, allow_tf32: bool = False
) -> list[OpRow]:
    """Aggregate calls by op name, place each on the roofline; sorted by device time.

    An op is placed only when every call of it is costed; its roof is the compute key most
    of its calls have (`roofline.call_compute_key`: `allow_tf32` says TF32 was on while
    they ran, which a trace does not record), its memory roof each call's
    (`roofline.memory_roof`: L2's for calls whose bytes fit in L2, L2's for the reads of a
    call whose every read argument fits in L2 and HBM's for the rest, else HBM's for the
    share of its bytes the call reads)."""
    # per-call figures stay arrays, read through each op's indexes: each op's are made into
    # Python numbers (summed as `sum` adds a list) one op at a time, so the calls are never
    # all held as objects
    which, op_names = value_codes(call_column(calls, "name"))
    # ops in order of their first call; each op's calls in their order
    ends = np.cumsum(np.bincount(which, minlength=len(op_names))).tolist()
    order = np.argsort(which, kind="stable")
    del which
    device = call_column(calls, "device_us")
    flops_ = call_column(calls, "flops")
    bytes_ = call_column(calls, "bytes")
    reads_ = call_column(calls, "read_bytes")
    largest_ = call_column(calls, "largest_read")
    known_ = call_column(calls, "known")
    families = call_column(calls, "family")
    # the roof key depends on a call's compute and family alone: counted per distinct pair
    compute_code, computes = value_codes(call_column(calls, "compute"))
    family_code, family_values = value_codes(families)
    width = max(len(family_values), 1)
    pair_code = compute_code * width + family_code
    del compute_code, family_code
    dtypes_ = call_column(calls, "dtypes")
    roof_of: dict[tuple, Any] = {}
    rows = []
    lo = 0
    for name, hi in zip(op_names, ends, strict=True):
        sel = order[lo:hi]
        n_calls = hi - lo
        lo = hi
        device_us = sum(device[sel].tolist())
        flops = sum(flops_[sel].tolist())
        nbytes = sum(bytes_[sel].tolist())
        known = bool(known_[sel].astype(bool).all())
        keys: Counter = Counter()
        distinct, first, counts = np.unique(pair_code[sel], return_index=True, return_counts=True)
        for k in np.argsort(first, kind="stable").tolist():  # in order of first call
            c, f = divmod(int(distinct[k]), width)
            pair, count = (computes[c], family_values[f]), int(counts[k])
            if pair not in roof_of:
                roof_of[pair] = call_compute_key(_Roof(*pair), allow_tf32)
            keys[roof_of[pair]] += count
        compute = keys.most_common(1)[0][0]
        dtypes = sorted(
            {
                d
                for ds in _distinct(dtypes_[sel].tolist())
                for d in ds
                if d not in ("Scalar", "ScalarList")
            }
        )
        row = OpRow(
            name=name,
            calls=n_calls,
            device_ms=device_us / 1e3,
            flops=flops,
            bytes=nbytes,
            arithmetic_intensity=(flops / nbytes if nbytes else None) if known else None,
            bound=None,
            achieved_bandwidth_fraction=None,
            achieved_flops_fraction=None,
            compute=compute,
            dtypes=dtypes,
            exact_cost=known,
            share_of_gpu_time=device_us / gpu_time_us if gpu_time_us else 0.0,
        )
        if known and ceilings is not None and device_us > 0 and (flops or nbytes):
            p = place(
                flops, nbytes, device_us / 1e6, ceilings, compute,
                call_bytes=bytes_[sel], family=families[sel[0]], call_reads=reads_[sel],
                call_largest=largest_[sel],
            )  # fmt: skip
            row.bound = p.bound
            row.memory_roof = p.memory_roof
            row.achieved_bandwidth_fraction = _f(p.achieved_bandwidth_fraction)
            row.achieved_flops_fraction = _f(p.achieved_flops_fraction)
            row.fraction_of_attainable = _f(p.fraction)
            row.attainable_ms = p.attainable_seconds * 1e3
        rows.append(row)
    rows.sort(key=lambda r: r.device_ms, reverse=True)
    return rows


@dataclass(frozen=True, slots=True)
class _Roof:
    """What `roofline.call_compute_key` reads of a call."""

    compute: str | None
    family: str


def _distinct(values: list) -> Any:
    """The distinct entries of `values` (itself where they cannot be hashed)."""
    try:
        return set(values)
    except TypeError:
        return values


def _f(x) -> float | None:
    return None if x is None else float(x)


#: a placed op whose fraction of its roof rounds above this is shown as ">100%"
ABOVE_ROOF = 1.005


def above_roof_note(rows) -> str | None:
    """One note when placed ops ran faster than the ceilings allow (the tables then show
    them as >100%): which op by how much, the two causes, and the command that re-measures."""

    def over(r) -> tuple[float, str]:
        return max(
            (r.achieved_bandwidth_fraction or 0.0, "memory bandwidth"),
            (r.achieved_flops_fraction or 0.0, f"{r.compute or 'compute'} FLOP/s"),
        )

    above = [r for r in rows if r.bound is not None and over(r)[0] > ABOVE_ROOF]
    if not above:
        return None
    top = max(above, key=lambda r: over(r)[0])
    fraction, ceiling = over(top)
    cause = (
        "a little above is what the H200 showed on traces and ceilings measured in one call "
        "(memory-bound ops up to 0.3% above passes timed by the kernel clock on a clean L2, "
        "a weight gradient's matmul 1.8% above the sweep's best for its shape); more is"
        if fraction <= NEAR_ROOF
        else "either"
    )
    return (
        f"{len(above)} op(s) ran above a ceiling ({top.name} at {fraction:.1%} of the measured "
        f"{ceiling}), shown as >100%: {cause} data still in L2 (the memory roof is HBM's "
        "streaming rate) or ceilings that are stale or from another machine; `membound "
        "roofline --refresh` on that GPU measures them again"
    )


#: above a ceiling by at most this, an op is within what ops and ceilings measured in one
#: call on the H200 showed (benchmarks/results/over_roof_2026-12-03k.txt: memory-bound ops
#: up to 0.33% above, `h200_healthy`'s 4096 x 4096 x 16384 A.T@B matmul 1.8%)
NEAR_ROOF = 1.025
