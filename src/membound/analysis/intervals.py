"""Sets of time intervals as two sorted NumPy arrays (starts, ends), disjoint after `union`.

Everything the timeline measures (GPU busy, idle gaps, what the host was doing) is a set
of intervals; these few operations are all it needs.
"""

from __future__ import annotations

import numpy as np

Intervals = tuple[np.ndarray, np.ndarray]

EMPTY: Intervals = (np.zeros(0), np.zeros(0))


def union(starts: np.ndarray, ends: np.ndarray) -> Intervals:
    """Merge possibly overlapping intervals into a sorted disjoint set."""
    starts = np.asarray(starts, dtype=np.float64)
    ends = np.asarray(ends, dtype=np.float64)
    if len(starts) == 0:
        return EMPTY
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    run_end = np.maximum.accumulate(e)
    # a new block starts where the start is past every end seen so far
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    idx = np.flatnonzero(new)
    block_end = np.append(idx[1:] - 1, len(s) - 1)
    return s[idx], run_end[block_end]


def total(iv: Intervals) -> float:
    return float(np.sum(iv[1] - iv[0])) if len(iv[0]) else 0.0


def clip(iv: Intervals, lo: float, hi: float) -> Intervals:
    s, e = np.maximum(iv[0], lo), np.minimum(iv[1], hi)
    keep = e > s
    return s[keep], e[keep]


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """Intersection of two disjoint sorted sets."""
    if len(a[0]) == 0 or len(b[0]) == 0:
        return EMPTY
    # for each interval of a, the b intervals that may overlap it
    lo = np.searchsorted(b[1], a[0], side="right")
    hi = np.searchsorted(b[0], a[1], side="left")
    counts = np.maximum(hi - lo, 0)
    if counts.sum() == 0:
        return EMPTY
    ai = np.repeat(np.arange(len(a[0])), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    bi = np.repeat(lo, counts) + offsets
    s = np.maximum(a[0][ai], b[0][bi])
    e = np.minimum(a[1][ai], b[1][bi])
    keep = e > s
    return s[keep], e[keep]


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """a minus b, both disjoint sorted sets."""
    if len(a[0]) == 0 or len(b[0]) == 0:
        return a
    lo, hi = _bounds(a)
    comp_s = np.concatenate([[lo], b[1]])
    comp_e = np.concatenate([b[0], [hi]])
    keep = comp_e > comp_s
    return intersect(a, (comp_s[keep], comp_e[keep]))


def gaps(iv: Intervals, lo: float, hi: float) -> Intervals:
    """The complement of `iv` inside [lo, hi]."""
    iv = clip(iv, lo, hi)
    s = np.concatenate([[lo], iv[1]])
    e = np.concatenate([iv[0], [hi]])
    keep = e > s
    return s[keep], e[keep]


def inside(ts: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Which times fall in one of the sorted, disjoint windows [starts[k], ends[k])."""
    ts = np.asarray(ts)
    if not len(starts):
        return np.zeros(len(ts), dtype=bool)
    j = np.searchsorted(starts, ts, side="right") - 1
    return (j >= 0) & (ts < ends[np.maximum(j, 0)])


def lookup(keys: np.ndarray, query: np.ndarray) -> np.ndarray:
    """For each of `query`, the index into `keys` of the entry equal to it (the first, in
    `keys`' order, where several are), -1 where none is or the query is negative (ids: -1
    is "none"). What joins GPU activity to the runtime call that launched it, by
    correlation id."""
    keys, query = np.asarray(keys), np.asarray(query)
    out = np.full(len(query), -1, dtype=np.int64)
    if not len(keys) or not len(query):
        return out
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    pos = np.minimum(np.searchsorted(sorted_keys, query), len(keys) - 1)
    hit = (sorted_keys[pos] == query) & (query >= 0)
    out[hit] = order[pos[hit]]
    return out


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of an integer array (ids, indices), ascending: `np.unique`'s
    answer, found by a sort. NumPy 2.3+ finds them by hashing when no inverse or counts are
    asked for, which takes over a second on a million distinct ids; a sort takes ~25 ms."""
    s = np.sort(np.asarray(values))
    if len(s) < 2:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    keep[1:] = s[1:] != s[:-1]
    return s[keep]


def distinct_inverse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(values, return_inverse=True)` of an array of non-negative integers (ids,
    indices): by a table over their range when that is not much longer than the array (no
    sort), else by `np.unique`."""
    values = np.asarray(values)
    if not len(values) or values.dtype.kind not in "iu" or values.min() < 0:
        return np.unique(values, return_inverse=True)
    top = int(values.max())
    if top > 4 * len(values) + 1024:
        return np.unique(values, return_inverse=True)
    present = np.zeros(top + 1, dtype=bool)
    present[values] = True
    rank = np.cumsum(present) - 1
    return np.flatnonzero(present).astype(values.dtype), rank[values]


def _bounds(a: Intervals) -> tuple[float, float]:
    return float(a[0][0]), float(a[1][-1])
