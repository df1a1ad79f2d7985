"""Host→device copies: `pageable-copy` and `blocking-copy`."""

from __future__ import annotations

import numpy as np

from membound.analysis import intervals as iv
from membound.analysis.findings import rule
from membound.analysis.fixes import pageable_fix
from membound.trace.model import (
    DATALOADER_ROLES,
    DATALOADER_WORKERS,
    H2D,
    LAUNCH_CALLS,
    MEMCPY_CALL,
    PAGEABLE,
    PINNED,
)

#: idle causes the GPU waits in beside a worker batch's copies that are not the copy's own
#: (`pageable_copy`), the GPU's turnaround (`queued`) or the loader's (`dataloader`,
#: `input-starved`'s)
_BESIDE_CAUSES = ("copy", "sync", "launch", "other")


def h2d_copies(ctx, pageable: bool | None) -> np.ndarray:
    """Indices of the host-to-device copies inside the analysed steps: from pageable memory
    (True), pinned (False) or either (None)."""
    gpu = ctx.trace.gpu
    sel = gpu.direction == H2D
    if pageable is not None:
        sel &= gpu.host_memory == (PAGEABLE if pageable else PINNED)
    return np.flatnonzero(sel & ctx.in_window(gpu.ts))


@rule("pageable-copy")
def pageable_copy(ctx):
    """H2D copies from pageable memory: `non_blocking=True` is silently synchronous.

    Time lost per step = [Σ over pageable H2D memcpys of max(0, duration − bytes ÷ pinned
    H2D bandwidth)] + [GPU idle while the host sat inside the runtime memcpy call of a
    pageable copy (timeline cause `pageable_copy`)], divided by the number of steps, + where
    a loader's workers made the batch and its release cost was measured, the GPU idle beside
    the copies that pinning moves off the training thread (`_worker_batch_release`). The
    pinned bandwidth is the measured ceiling (`membound roofline`), else the fastest pinned
    copy in the trace, else a typical PCIe Gen4 rate (the evidence says which).
    """
    sel = h2d_copies(ctx, pageable=True)
    if len(sel) == 0:
        return []
    gpu = ctx.trace.gpu
    bw, bw_source = ctx.pinned_h2d_bandwidth()
    nbytes = np.maximum(gpu.bytes[sel], 0).astype(np.float64)
    dur_us = gpu.dur[sel]
    pinned_us = nbytes / bw * 1e6
    excess_ms = float(np.sum(np.maximum(dur_us - pinned_us, 0.0))) / 1e3
    idle_ms = ctx.idle_ms_per_step("pageable_copy") * ctx.n_steps
    lost = ctx.per_step(excess_ms + idle_ms)
    beside = _worker_batch_release(ctx)
    if beside is not None:
        lost += beside["moved_off_thread_ms_per_step"]
    achieved = float(nbytes.sum() / (dur_us.sum() * 1e-6)) if dur_us.sum() > 0 else 0.0
    spans = [(float(gpu.ts[i]), float(gpu.ts[i] + gpu.dur[i])) for i in sel[:2000]]
    spans += ctx.spans(ctx.idle("pageable_copy"))
    return [
        ctx.finding(
            code="pageable-copy",
            title="host-to-device copies from pageable memory block the host and starve the GPU",
            lost_ms=lost,
            evidence={
                "copies_per_step": len(sel) / ctx.n_steps,
                "bytes_per_step": float(nbytes.sum()) / ctx.n_steps,
                "copy_ms_per_step": float(dur_us.sum()) / 1e3 / ctx.n_steps,
                "achieved_bandwidth_gb_s": achieved / 1e9,
                "pinned_bandwidth_gb_s": bw / 1e9,
                "pinned_bandwidth_source": bw_source,
                "excess_over_pinned_ms_per_step": ctx.per_step(excess_ms),
                "gpu_idle_in_copy_call_ms_per_step": ctx.per_step(idle_ms),
                **(beside or {}),
            },
            fix=pageable_fix(
                ctx.frameworks, bool(np.isin(ctx.trace.cpu.role, DATALOADER_ROLES).any())
            ),
            spans=spans,
        )
    ]


def _worker_batch_release(ctx) -> dict | None:
    """What pinning moves off the training thread beside the copies of a batch a loader's
    worker made (`trace.loader_probe`): the thread drops the shared-memory batch (its pages
    unmapped) in a host gap the timeline cannot name, right after the copies (or, in a loop
    that keeps the batch until the next `__next__`, right before them). Per step: the GPU
    idle in the copying thread's gaps from the end of the loader's `__next__` to the batch's
    first pageable copy call and from the end of its last to the thread's next launch, in
    the causes `_BESIDE_CAUSES`, at most the measured release cost per batch x batches per
    step. None without a loader with workers, or without the measurement (a trace recorded
    elsewhere: then only the copies count, as before)."""
    moved = ctx.loader_release_moved_ms
    t = ctx.trace
    cpu, rt, gpu = t.cpu, t.runtime, t.gpu
    nexts = np.flatnonzero((cpu.role == DATALOADER_WORKERS) & ctx.in_window(cpu.ts))
    if moved is None or not len(nexts) or not len(rt):
        return None
    corr = gpu.correlation[(gpu.direction == H2D) & (gpu.host_memory == PAGEABLE)]
    copy = np.flatnonzero((rt.call == MEMCPY_CALL) & np.isin(rt.correlation, corr))
    launch = np.flatnonzero(np.isin(rt.call, LAUNCH_CALLS))
    if not len(copy):
        return None
    nexts = nexts[np.argsort(cpu.ts[nexts], kind="stable")]
    n_start, n_end = cpu.ts[nexts], cpu.ts[nexts] + cpu.dur[nexts]
    copy = copy[np.argsort(rt.ts[copy], kind="stable")]
    c_ts = rt.ts[copy]
    # each batch's copies: those issued after its __next__ returned, before the next began
    lo = np.searchsorted(c_ts, n_end, side="left")
    hi = np.searchsorted(c_ts, np.append(n_start[1:], np.inf), side="left")
    by_tid: dict[int, np.ndarray] = {}  # launch call times per thread, sorted
    starts, ends = [], []
    for k in np.flatnonzero(hi > lo):
        mine = copy[lo[k] : hi[k]]
        tid = int(rt.tid[mine[0]])
        mine = mine[rt.tid[mine] == tid]
        first, last = float(rt.ts[mine].min()), float((rt.ts[mine] + rt.dur[mine]).max())
        if tid not in by_tid:
            by_tid[tid] = np.sort(rt.ts[launch[rt.tid[launch] == tid]])
        times = by_tid[tid]
        i = np.searchsorted(times, last, side="left")
        starts += [float(n_end[k]), last]
        ends += [first, float(times[i]) if i < len(times) else last]
    if not starts:
        return None
    gaps = iv.union(np.array(starts), np.array(ends))
    idle = 0.0
    for cause in _BESIDE_CAUSES:
        s, e = iv.intersect(ctx.idle(cause), gaps)
        idle += float(np.sum(e - s)) / 1e3
    idle_ms = ctx.per_step(idle)
    batches = len(nexts) / ctx.n_steps
    cap = moved * batches
    return {
        "worker_batches_per_step": batches,
        "gpu_idle_beside_copies_ms_per_step": idle_ms,
        "release_moved_ms_per_batch": moved,
        "moved_off_thread_ms_per_step": min(idle_ms, cap),
    }


@rule("blocking-copy")
def blocking_copy(ctx):
    """H2D copies the GPU waits on: no kernel runs while they do.

    Time lost per step = Σ over H2D memcpys of the part of the copy not overlapped by any
    kernel (on any stream), counting for a pageable copy only what a pinned copy of the same
    bytes would take (bytes ÷ pinned bandwidth; the rest is `pageable-copy`'s), ÷ steps.
    A prefetcher that copies on a side stream hides exactly this time.
    """
    sel = h2d_copies(ctx, pageable=None)
    if len(sel) == 0:
        return []
    t = ctx.trace
    gpu = t.gpu
    bw, _ = ctx.pinned_h2d_bandwidth()
    kernels = ctx.timeline.kernel_busy
    lost_us = 0.0
    exposed_ms = 0.0
    spans = []
    for i in sel.tolist():
        s, e = float(gpu.ts[i]), float(gpu.ts[i] + gpu.dur[i])
        covered = iv.total(iv.clip(kernels, s, e))
        uncovered = (e - s) - covered
        if uncovered <= 0:
            continue
        exposed_ms += uncovered / 1e3
        if gpu.host_memory[i] == PAGEABLE:
            # only the pinned-equivalent part belongs here
            pinned_us = max(float(gpu.bytes[i]), 0.0) / bw * 1e6
            uncovered = min(uncovered, pinned_us)
        lost_us += uncovered
        if len(spans) < 2000:
            spans.append((s, e))
    lost = ctx.per_step(lost_us / 1e3)
    if lost <= 0:
        return []
    return [
        ctx.finding(
            code="blocking-copy",
            title="the GPU waits for host-to-device copies instead of overlapping them with compute",
            lost_ms=lost,
            evidence={
                "copies_per_step": len(sel) / ctx.n_steps,
                "exposed_copy_ms_per_step": exposed_ms / ctx.n_steps,
                "overlapped_with_kernels": False,
            },
            fix=(
                "Copy the next batch on a side stream while the current step computes: "
                "membound.data.prefetch(loader) (pinned staging + side-stream copy), "
                "or torch.cuda.Stream + tensor.to(device, non_blocking=True) from pinned memory."
            ),
            spans=spans,
        )
    ]
