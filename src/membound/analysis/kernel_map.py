"""Which op call launched each kernel of the timeline pass: the two passes' steps matched
kernel by kernel.

membound's timeline pass records no CPU op (its idle causes come from there, with the least
overhead: `docs/capture.md`), so its kernels carry no op; the ops pass records the ops and
their kernels (`ctx.calls`), but its idle is the CPU profiler's. A training step launches
the same kernels in the same order every time it runs, so where a step of the timeline pass
launched exactly the kernels, by name and in order, that a step of the ops pass did, the
k-th kernel of the one is the k-th kernel of the other, and the call that launched it there
launched it here too. A timm ConvNeXt under --amp on an H100 (2026-12-06) launched 1626
kernels in each of its 5 timeline steps and 3 ops steps, every one matching.

A step that matches no ops step exactly (a data-dependent branch: timm's random erasing, a
Python loop over the batch's samples that erases each with probability 0.2, launched a
different number of kernels in every step of an EfficientNet-B0 on an H100, 2026-12-06) is
aligned with the ops step closest to it: the longest common runs of kernel names
(`difflib.SequenceMatcher`) pair kernels of the two, and kernels in no such run stay unmapped
(-1). A step that shares less than `ALIGN_MIN` of its kernels with every ops step (a step that
logs, a recompilation) is left unmapped, never guessed.
"""

from __future__ import annotations

import difflib

import numpy as np

from membound.analysis.timeline import launch_times, step_windows
from membound.trace.model import KERNEL, MEMCPY, MEMSET

#: the least share of a step's kernels (and of the ops step's) that alignment must pair for a
#: step that matches no ops step exactly to be mapped at all
ALIGN_MIN = 0.9


def _step_kernels(trace, windows) -> list[np.ndarray]:
    """Per step window (`timeline.step_windows`' tuples), the indices of the GPU activities
    (kernels, copies, memsets: an EMA's `copy_` between tensors of one dtype is a
    device-to-device copy) launched inside its host window, in launch order."""
    gpu = trace.gpu
    k = np.flatnonzero(np.isin(gpu.kind, (KERNEL, MEMCPY, MEMSET)))
    if not len(k) or not len(trace.runtime):
        return [np.zeros(0, dtype=np.int64) for _ in windows]
    launched = launch_times(trace.runtime, gpu.correlation[k])
    ok = np.isfinite(launched)
    k, launched = k[ok], launched[ok]
    order = np.argsort(launched, kind="stable")
    k, launched = k[order], launched[order]
    out = []
    for w in windows:
        lo, hi = np.searchsorted(launched, [w[3], w[4]], side="left")
        out.append(k[lo:hi])
    return out


def _kernel_calls(calls, op_trace, kernels: np.ndarray) -> np.ndarray:
    """The call (index into `calls`) that ran each of the ops pass's `kernels`: the one whose
    span of kernels (first start to last end, `OpCall.first_kernel_us` ..
    `last_kernel_end_us`) holds the kernel's start, the latest to begin where spans nest;
    -1 where none does (a kernel outside the analysed steps)."""
    from membound.analysis.op_calls import call_column

    first = np.asarray(call_column(calls, "first_kernel_us"), dtype=np.float64)
    last = np.asarray(call_column(calls, "last_kernel_end_us"), dtype=np.float64)
    order = np.argsort(first, kind="stable")
    ts = op_trace.gpu.ts[kernels].astype(np.float64)
    i = np.searchsorted(first[order], ts, side="right") - 1
    found = order[np.maximum(i, 0)]
    hit = (i >= 0) & (ts <= last[found] + 1e-6)
    return np.where(hit, found, -1)


def timeline_calls(ctx) -> np.ndarray | None:
    """For each GPU activity of the timeline pass (`ctx.trace.gpu`), the index of the call in
    `ctx.calls` that launched it (module docstring), -1 where its step matched no ops step;
    None without an ops pass of its own (a single-pass trace: its calls are its own
    kernels' already) or without calls."""
    op_trace, calls = getattr(ctx, "op_trace", None), ctx.calls
    if op_trace is None or op_trace is ctx.trace or not len(calls):
        return None
    cached = getattr(ctx, "_timeline_calls", None)
    if cached is not None:
        return cached
    names_t, names_o = ctx.trace.names, op_trace.names
    out = np.full(len(ctx.trace.gpu), -1, dtype=np.int64)
    op_windows, _ = step_windows(op_trace)
    reference: dict[tuple, np.ndarray] = {}  # an ops step's kernel names -> its calls
    for ks in _step_kernels(op_trace, op_windows):
        key = tuple(names_o[int(c)] for c in op_trace.gpu.name[ks].tolist())
        if key and key not in reference:
            reference[key] = _kernel_calls(calls, op_trace, ks)
    windows = [
        (s.index, s.start_us, s.end_us, s.host_start_us, s.host_end_us)
        for s in ctx.steps
        if s.host_start_us is not None and s.host_end_us is not None
    ]
    for ks in _step_kernels(ctx.trace, windows):
        key = tuple(names_t[int(c)] for c in ctx.trace.gpu.name[ks].tolist())
        match = reference.get(key)
        if match is not None:
            out[ks] = match
            continue
        paired = _aligned(key, reference)
        if paired is not None:
            mine, ref_calls = paired
            out[ks[mine >= 0]] = ref_calls[mine[mine >= 0]]
    ctx._timeline_calls = out
    return out


def _aligned(key: tuple, reference: dict) -> tuple[np.ndarray, np.ndarray] | None:
    """(per kernel of the step `key` (its kernel names in order): the position of the ops
    step's kernel it pairs with, -1 none; that ops step's calls) for the ops step of
    `reference` closest in length to it, where their longest common runs of names pair at
    least `ALIGN_MIN` of the kernels of each; else None."""
    if not key or not reference:
        return None
    ref_key = min(reference, key=lambda k: abs(len(k) - len(key)))
    if min(len(key), len(ref_key)) < ALIGN_MIN * max(len(key), len(ref_key)):
        return None
    # autojunk off: a step repeats a few kernel names thousands of times, which the
    # heuristic would drop as junk and pair nothing
    blocks = difflib.SequenceMatcher(None, key, ref_key, autojunk=False).get_matching_blocks()
    mine = np.full(len(key), -1, dtype=np.int64)
    for b in blocks:
        mine[b.a : b.a + b.size] = np.arange(b.b, b.b + b.size)
    if (mine >= 0).sum() < ALIGN_MIN * max(len(key), len(ref_key)):
        return None
    return mine, reference[ref_key]


def gap_calls(ctx, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """For GPU gaps ending at `ends` (µs), the call (index into `ctx.calls`) that launched
    the activity ending each gap (the first to start at or after its end) and the call that
    launched the activity before that one, in start order; -1 where there is none or it is
    unmapped. None where the activities cannot be mapped (`timeline_calls`)."""
    mapped = timeline_calls(ctx)
    if mapped is None:
        return None
    order = getattr(ctx, "_gpu_start_order", None)
    if order is None:
        order = ctx._gpu_start_order = np.argsort(ctx.trace.gpu.ts, kind="stable")
    j = np.searchsorted(ctx.trace.gpu.ts[order], ends - 1e-3, side="left")
    n = len(order)
    if not n:
        none = np.full(len(ends), -1, dtype=np.int64)
        return none, none.copy()
    nxt = np.where(j < n, mapped[order[np.minimum(j, n - 1)]], -1)
    prv = np.where(j > 0, mapped[order[np.maximum(j - 1, 0)]], -1)
    return nxt, prv


def idle_before(ctx, causes: tuple[str, ...], wanted: np.ndarray) -> dict[str, float]:
    """ms per step, by cause, of the `causes`' idle (`ctx.idle_ms_per_step`: the profiler's
    share set aside) in the GPU's gaps that end with work launched by one of the calls
    `wanted` (a mask over `ctx.calls`): the GPU waiting on the host while it got to them.
    One gap may hold several causes (the host in Python, then in the launch call); each part
    counts. 0 where the activities cannot be mapped (`timeline_calls`)."""
    out = dict.fromkeys(causes, 0.0)
    if timeline_calls(ctx) is None or not wanted.any():
        return out
    for cause in causes:
        total = ctx.idle_ms_per_step(cause)
        starts, ends = ctx.idle(cause)
        if not total > 0 or not len(starts):
            continue
        nxt, _ = gap_calls(ctx, ends)
        hit = (nxt >= 0) & wanted[np.maximum(nxt, 0)]
        out[cause] = total * float(np.sum((ends - starts)[hit])) / float(np.sum(ends - starts))
    return out


def idle_inside(ctx, cause: str, wanted: np.ndarray) -> float:
    """ms per step of `cause`'s idle (`ctx.idle_ms_per_step`: the profiler's share set aside)
    in the GPU's gaps between two activities that one and the same call launched, a call of
    `wanted` (a mask over `ctx.calls`): a library op that launches its kernels one by one
    (cuDNN's LSTM, a kernel per layer and time step) waiting on its own launches. No change
    around the op shortens those gaps; only replaying its launches (a CUDA graph) does.
    0 where the activities cannot be mapped (`timeline_calls`)."""
    total = ctx.idle_ms_per_step(cause)
    starts, ends = ctx.idle(cause)
    if timeline_calls(ctx) is None or not wanted.any() or not total > 0 or not len(starts):
        return 0.0
    nxt, prv = gap_calls(ctx, ends)
    hit = (nxt >= 0) & (nxt == prv) & wanted[np.maximum(nxt, 0)]
    return total * float(np.sum((ends - starts)[hit])) / float(np.sum(ends - starts))
