"""`analysis.ops._parents` (pointer jumping) against the stack walk it replaced, and the
sort-free `intervals.distinct`/`distinct_inverse` against `np.unique`, on random op trees
with tied starts (integer-µs traces tie often; the checked-in fixtures never do)."""

from __future__ import annotations

import numpy as np
import pytest

from membound.analysis import intervals as iv
from membound.analysis.ops import _parents
from membound.trace.model import CPU_OP, USER_ANNOTATION, Table, Trace


def _stack_parents(ts, dur, tid, kind) -> np.ndarray:
    """The reference: per thread, ops by (start, longer first), a stack of open spans."""
    parent = np.full(len(ts), -1, dtype=np.int64)
    ops = np.flatnonzero(kind == CPU_OP)
    for t in np.unique(tid[ops]):
        idx = ops[tid[ops] == t]
        idx = idx[np.lexsort((-dur[idx], ts[idx]))]
        stack: list[tuple[int, float]] = []
        for i in idx.tolist():
            while stack and stack[-1][1] <= ts[i]:
                stack.pop()
            if stack:
                parent[i] = stack[-1][0]
            stack.append((i, ts[i] + dur[i]))
    return parent


def _ops(rng, n: int, integer_us: bool):
    """Nested, sibling and partly overlapping spans on two threads, some annotations."""
    ts = np.cumsum(rng.exponential(3.0, n))
    dur = rng.choice([0.0, 1.0, 5.0, 40.0, 400.0], size=n) * rng.random(n)
    if integer_us:  # whole µs: starts and ends tie
        ts, dur = np.floor(ts), np.floor(dur)
    tid = rng.integers(1, 3, n)
    kind = np.where(rng.random(n) < 0.1, USER_ANNOTATION, CPU_OP)
    return ts, dur, tid, kind


def _trace(ts, dur, tid, kind) -> Trace:
    cpu = Table({"ts": ts, "dur": dur, "tid": tid, "kind": kind})
    empty = Table({"ts": np.zeros(0)})
    return Trace("t", [], cpu, empty, empty, [])


@pytest.mark.parametrize("integer_us", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_parents_match_the_stack_walk(seed, integer_us):
    rng = np.random.default_rng(seed)
    cols = _ops(rng, [1, 2, 37, 500, 4231, 20000][seed], integer_us)
    parent, per_tid = _parents(_trace(*cols))
    np.testing.assert_array_equal(parent, _stack_parents(*cols))
    ts, dur, tid, kind = cols
    for t, (idx, starts) in per_tid.items():
        mine = np.flatnonzero((kind == CPU_OP) & (tid == t))
        np.testing.assert_array_equal(idx, mine[np.lexsort((-dur[mine], ts[mine]))])
        np.testing.assert_array_equal(starts, ts[idx])


@pytest.mark.parametrize("top", [0, 5, 341, 10**9])
def test_distinct_is_np_unique(top):
    rng = np.random.default_rng(top)
    for dtype in (np.int32, np.int64):
        values = rng.integers(0, top + 1, 4231).astype(dtype)
        np.testing.assert_array_equal(iv.distinct(values), np.unique(values))
        u, inv = iv.distinct_inverse(values)
        want_u, want_inv = np.unique(values, return_inverse=True)
        assert u.dtype == want_u.dtype
        np.testing.assert_array_equal(u, want_u)
        np.testing.assert_array_equal(inv, want_inv)
    assert len(iv.distinct(np.zeros(0, dtype=np.int64))) == 0
    assert len(iv.distinct_inverse(np.zeros(0, dtype=np.int64))[0]) == 0
