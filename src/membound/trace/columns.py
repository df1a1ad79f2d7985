"""Typed columns filled batch by batch from parsed events, whatever their fields hold.

Each batch of row tuples becomes NumPy arrays at once, so Python objects live only for one
batch (the memory bound of a 1 GB trace). Fields are whatever a file says: a string thread
id, an id past int64, a null, a list. Times must be finite numbers: an event whose `ts` or
`dur` is missing, null, NaN, non-numeric, negative (dur) or absurd is dropped and counted
by reason (`Trace.dropped`, reasons in `trace.model.DROP_REASONS`).
"""

from __future__ import annotations

import math
import zlib
from typing import Any

import numpy as np

#: a duration past this (µs: ~28 hours) is no profiled event
MAX_DUR_US = 1e11
#: a timestamp past this (µs: ~3000 years from the epoch) is no clock reading
MAX_ABS_TS_US = 1e17
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1

#: integer columns holding thread-like ids: odd values get distinct stable ids, not -1
THREAD_COLUMNS = ("tid", "stream")


class Columns:
    """Named typed columns; `ts` and `dur` (first two) are checked, bad rows dropped."""

    def __init__(self, dropped: dict[str, int], *, check_times: bool = True, **types: str):
        self.types = {name: np.dtype(code) for name, code in types.items()}
        self.parts: dict[str, list[np.ndarray]] = {name: [] for name in types}
        self.dropped = dropped
        #: False keeps bad times as they are (NaN where not a number): host events, whose step
        #: marks the analysis needs even when untimed, to leave out the step they bound
        #: instead of merging it into its neighbour (analysis/clean.py)
        self.check_times = check_times

    def extend(self, rows: list[tuple]) -> None:
        if not rows:
            return
        cols = {
            name: column(values, self.types[name], name)
            for name, values in zip(self.types, zip(*rows, strict=False), strict=False)
        }
        keep = self._valid(cols["ts"], cols["dur"]) if self.check_times else None
        for name, arr in cols.items():
            self.parts[name].append(arr if keep is None else arr[keep])

    def _valid(self, ts: np.ndarray, dur: np.ndarray) -> np.ndarray | None:
        bad_ts = ~np.isfinite(ts) | (np.abs(ts) > MAX_ABS_TS_US)
        bad_dur = ~np.isfinite(dur)
        with np.errstate(invalid="ignore"):
            negative = dur < 0
            huge = dur > MAX_DUR_US
        bad = bad_ts | bad_dur | negative | huge
        if not bad.any():
            return None
        for reason, mask in (
            ("bad_ts", bad_ts),
            ("bad_dur", bad_dur & ~bad_ts),
            ("negative_dur", negative & ~bad_ts),
            ("huge_dur", huge & ~bad_ts & ~bad_dur),
        ):
            n = int(mask.sum())
            if n:
                self.dropped[reason] = self.dropped.get(reason, 0) + n
        return ~bad

    def freeze(self) -> dict[str, np.ndarray]:
        return {
            name: np.concatenate(parts) if parts else np.zeros(0, dtype=self.types[name])
            for name, parts in self.parts.items()
        }


def column(values: tuple, dtype: np.dtype, name: str = "") -> np.ndarray:
    """`values` as a column of `dtype`: floats NaN where not a number, ints -1 (or, for
    thread-like columns, a distinct stable negative id) where not an int64."""
    if dtype.kind == "f":
        try:
            arr = np.array(values)
        except (TypeError, ValueError, OverflowError):
            arr = None
        if arr is not None and arr.ndim == 1 and arr.dtype.kind in "fiu":
            return arr.astype(dtype, copy=False)
        # None, text ("12" is no time either), bools, lists: element by element
        return np.array([_float(v) for v in values], dtype=dtype)
    try:
        arr = np.array(values)
    except (TypeError, ValueError, OverflowError):
        arr = None
    if arr is not None and arr.dtype.kind in "ib" and arr.ndim == 1:
        return arr.astype(dtype, copy=False)
    conv = _thread_id if name in THREAD_COLUMNS else _id
    return np.array([conv(v) for v in values], dtype=dtype)


def _float(v: Any) -> float:
    if type(v) is bool or v is None or isinstance(v, str):
        return math.nan
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        return math.nan


def _id(v: Any) -> int:
    """An int64 id, or -1 (unknown) for anything else: a null, a string, 2**70, 1.5e300."""
    if type(v) is int:
        return v if _I64_MIN <= v <= _I64_MAX else -1
    if type(v) is float and math.isfinite(v) and abs(v) < 2.0**63:
        return int(v)
    if type(v) is str:
        try:
            i = int(v)
        except ValueError:
            return -1
        return i if _I64_MIN <= i <= _I64_MAX else -1
    return -1


def _thread_id(v: Any) -> int:
    """Thread or stream ids like "stream 7" or "PyTorch Profiler", or past int64: kept
    distinct but stable (negative, below -1); null stays -1."""
    if v is None:
        return -1
    i = _id(v)
    if i != -1 or v == -1 or v == "-1":
        return i
    return -2 - (zlib.crc32(str(v).encode()) & 0xFFFFFF)
