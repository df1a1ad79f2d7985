"""`host-bound`: the GPU waits while the host works on something that launches nothing."""

from __future__ import annotations

from collections import Counter

import numpy as np

from membound.analysis import kernel_map
from membound.analysis.findings import rule
from membound.analysis.fixes import loop_owner
from membound.analysis.rules.copies import h2d_copies
from membound.analysis.rules.memory import loop_launch_ms
from membound.analysis.timeline import step_windows
from membound.trace.model import CPU_OP, H2D, KERNEL, LAUNCH_CALLS, MEMCPY, MEMCPY_CALL, SYNC

#: how many of the ops the longest gaps precede the evidence names
TOP_OPS = 5
#: launches between two of a step's reads from the GPU for them to be two points of it
#: (`sync_points`): the planted loops of `examples/planted` read the loss through one
#: reduction kernel at the start of the next step's window, one point with the step's edge
MIN_SIDE_LAUNCHES = 3

FIX = (
    "Take the host's work out of the step: capture the whole step (forward, backward, "
    "clipping, the optimizer step) once in a CUDA graph and replay it "
    "(torch.cuda.CUDAGraph and torch.cuda.graph, with the batch copied into static input "
    "tensors: PyTorch's whole-network capture), so the host runs none of this per step; it "
    "needs static shapes and no host sync inside the step (read the loss after the replay). "
    "torch.compile(mode='reduce-overhead') graphs only the compiled model, not the host "
    "work around it. Or find the host code between these ops (a per-step Python "
    "computation, a CPU-side metric) and move it off the step."
)


def _before_ops(ctx, starts: np.ndarray, ends: np.ndarray, lost: float) -> dict[str, float]:
    """`lost` (ms per step) shared among the ops whose work ends the gaps `starts`..`ends`
    (the timeline's activities mapped to calls, `kernel_map.gap_calls`) by the gaps'
    length, the largest `TOP_OPS`; {} where nothing maps. A gap that no activity ends (the
    trace's last) goes to no op."""
    calls = kernel_map.gap_calls(ctx, ends) if len(starts) and lost > 0 else None
    if calls is None:
        return {}
    nxt = calls[0]
    length = ends - starts
    total = float(length.sum())
    by: dict[str, float] = {}
    for call, dur in zip(nxt.tolist(), length.tolist(), strict=True):
        if call >= 0:
            name = ctx.calls[call].name
            by[name] = by.get(name, 0.0) + dur
    top = sorted(by.items(), key=lambda kv: -kv[1])[:TOP_OPS]
    return {name: lost * dur / total for name, dur in top}


def mid_step_syncs(ctx) -> float:
    """`sync_points(ctx)`'s first figure: the read points per step beyond one."""
    return sync_points(ctx)[0]


def backward_syncs(ctx) -> float:
    """`sync_points(ctx)`'s second figure: syncs per step issued from a thread other than
    the one that launches the step's first work (the autograd engine's: an op of the
    backward that waits for the GPU, as a sparse matrix product's backward sorting its
    indices with thrust). No CUDA graph can hold such an op: on an H100 (2026-12-06,
    `tests/fixtures/h100_real_gcn_cora_oos1`) capturing pygcn's epoch failed with
    cudaErrorStreamCaptureUnsupported inside `torch.spmm`'s backward."""
    return sync_points(ctx)[1]


#: said where `shapes_vary`: why no CUDA graph fits the step
SHAPES_VARY_FIX = (
    "The step's ops take other shapes from one step to the next (inputs resized or padded per "
    "batch, data-dependent sizes), so no CUDA graph can replay it: a graph holds one fixed "
    "sequence of kernels at fixed shapes."
)
#: share of one recorded step's op calls (name and input shapes, as multisets) that the next
#: recorded step does not have, above which the loop's shapes change from step to step
#: (`shapes_vary`); a log line every N steps adds a few calls, not a tenth of them
SHAPES_VARY_SHARE = 0.10


def shapes_vary(ctx) -> bool:
    """Whether the loop's ops take other input shapes from one step to the next: a CUDA graph
    replays one fixed sequence of kernels at fixed shapes, so none fits such a step
    (torchvision's detection reference on an H100, 2026-12-06: each batch resized to its
    images' sizes, 1780-1799 kernels a recorded step; a collator that pads to the longest
    sequence). Read in the trace that recorded shapes (the ops pass, else the timeline):
    for consecutive recorded steps, the share of one step's (op, shapes) calls the next
    lacks; true where the median of those shares is above `SHAPES_VARY_SHARE`. A window with
    under half the median count of calls (the ops pass's last, cut short) is no step. False
    where fewer than two steps recorded shapes. Cached on the context."""
    cached = getattr(ctx, "_shapes_vary", None)
    if cached is not None:
        return cached
    out = _shapes_vary(getattr(ctx, "op_trace", None) or ctx.trace)
    ctx._shapes_vary = out
    return out


def _shapes_vary(trace) -> bool:
    cpu = trace.cpu
    ops = np.flatnonzero((cpu.kind == CPU_OP) & (cpu.shape >= 0))
    windows, marked = step_windows(trace)
    if not marked or len(windows) < 2 or not len(ops):
        return False
    ts = cpu.ts[ops]
    # an op's input dims and types, not its concrete inputs (a row index, a scalar): a loader
    # that takes rows one by one calls select with another index each time, at one shape
    keys = {
        i: (repr(trace.shapes[i][0]), repr(trace.shapes[i][1]))
        for i in np.unique(cpu.shape[ops]).tolist()
    }
    steps = []
    for _, _, _, lo, hi in windows:
        sel = ops[(ts >= lo) & (ts < hi)]
        shape = [keys[i] for i in cpu.shape[sel].tolist()]
        steps.append(Counter(zip(cpu.name[sel].tolist(), shape, strict=True)))
    # a window the ops pass cut short (its last, holding a read and no step) is no step
    full = np.median([sum(c.values()) for c in steps]) / 2
    steps = [c for c in steps if sum(c.values()) >= full and c]
    shares = [
        sum((a - b).values()) / sum(a.values()) for a, b in zip(steps, steps[1:], strict=False)
    ]
    return bool(shares) and float(np.median(shares)) > SHAPES_VARY_SHARE


def sync_points(ctx) -> tuple[float, float]:
    """Points per step, beyond one, at which the host reads from the GPU in the middle of the
    step's work (`.item()`, `.cpu()`, `torch.cuda.synchronize`, a GradScaler's inf check).
    A step is a cycle: one read point can be its edge (a capture starts right after it:
    pygcn reads four numbers at the end of each epoch's evaluation, before the next epoch's
    training), two cannot (DCGAN reads between the discriminator's update and the
    generator's). Syncs with fewer than `MIN_SIDE_LAUNCHES` launches between them are one
    point, and so are the first and the last of a step with as few launches around the
    step's edge; the sync that ends a host-to-device copy (the batch's way in) is no read.
    A step with more than one point cannot be captured whole in a CUDA graph until the reads
    move to one place. Returns (those points beyond one, the syncs from another thread than
    the step's first launch's: `backward_syncs`), per step; cached on the context."""
    cached = getattr(ctx, "_sync_points", None)
    if cached is not None:
        return cached
    out = _sync_points(ctx)
    ctx._sync_points = out
    return out


def _sync_points(ctx) -> tuple[float, float]:
    rt = ctx.trace.runtime
    if not len(rt) or not ctx.steps:
        return 0.0, 0.0
    order = np.argsort(rt.ts, kind="stable")
    ts, call, tid = rt.ts[order], rt.call[order], rt.tid[order]
    gpu = ctx.trace.gpu
    h2d = set(gpu.correlation[(gpu.kind == MEMCPY) & (gpu.direction == H2D)].tolist())
    corr = rt.correlation[order]
    is_launch = np.isin(call, LAUNCH_CALLS)
    launches, launch_tid = ts[is_launch], tid[is_launch]
    # each call's previous runtime call on its own thread (-1: none)
    prev = np.full(len(ts), -1, dtype=np.int64)
    for t in np.unique(tid).tolist():
        mine = np.flatnonzero(tid == t)
        prev[mine[1:]] = mine[:-1]
    keep = [
        i
        for i in np.flatnonzero(call == SYNC).tolist()
        if not (prev[i] >= 0 and call[prev[i]] == MEMCPY_CALL and int(corr[prev[i]]) in h2d)
    ]
    reads_at, reads_tid = ts[keep], tid[keep]  # in time order (ts is sorted)
    extra = elsewhere = 0
    for s in ctx.steps:
        lo, hi = s.host_start_us, s.host_end_us
        if lo is None or hi is None:
            continue
        inside = (reads_at >= lo) & (reads_at < hi)
        first = np.searchsorted(launches, lo)
        if first < len(launches) and launches[first] < hi:
            elsewhere += int(np.count_nonzero(inside & (reads_tid != launch_tid[first])))
        mine = reads_at[inside]
        if not len(mine):
            continue
        # launches between consecutive reads: a new point where enough work lies between
        n = np.searchsorted(launches, mine)
        points = 1 + int(np.count_nonzero(np.diff(n) >= MIN_SIDE_LAUNCHES))
        edge = np.count_nonzero((launches >= lo) & (launches < mine[0])) + np.count_nonzero(
            (launches > mine[-1]) & (launches < hi)
        )
        if points > 1 and edge < MIN_SIDE_LAUNCHES:
            points -= 1  # the first and the last meet across the step's edge
        extra += points - 1
    return extra / ctx.n_steps, elsewhere / ctx.n_steps


def _input_side(ctx, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Which gaps sit on the input side of their step: they end at or before the first
    kernel after the step's batch copies (the batch's way in: fetching it, copying it, a
    framework's hooks around that), which no graph of the step holds. The batch's copies
    are the step's first host-to-device copies, up to the first kernel that starts after
    the first of them ended: copies later in the step are the model's own (wav2vec2's
    SpecAugment mask and its CTC loss's lengths, 70 and 134 ms into a 275 ms step on the
    H100, `tests/fixtures/h100_real_wav2vec2_ctc_truth1`, had put half the step's host
    pauses on its input side). A step that copies nothing in (its data on the GPU already)
    has no input side."""
    gpu = ctx.trace.gpu
    h2d = h2d_copies(ctx, pageable=None)
    kernels = np.flatnonzero(gpu.kind == KERNEL)
    out = np.zeros(len(starts), dtype=bool)
    if not len(h2d) or not len(kernels):
        return out
    k_ts = np.sort(gpu.ts[kernels])
    for s in ctx.steps:
        mine = h2d[(gpu.ts[h2d] >= s.start_us) & (gpu.ts[h2d] < s.end_us)]
        if not len(mine):
            continue
        mine = mine[np.argsort(gpu.ts[mine], kind="stable")]
        first_end = float(gpu.ts[mine[0]] + gpu.dur[mine[0]])
        k = np.searchsorted(k_ts, first_end, side="left")
        if k < len(k_ts):  # the batch: the copies that start before that kernel
            mine = mine[gpu.ts[mine] < k_ts[k]]
        last_in = float(np.max(gpu.ts[mine] + gpu.dur[mine]))
        i = np.searchsorted(k_ts, last_in, side="left")
        first = float(k_ts[i]) if i < len(k_ts) else s.end_us
        out |= (ends >= s.start_us) & (ends <= first + 1e-3)
    return out


@rule("host-bound")
def host_bound(ctx):
    """GPU idle while the host is busy between launches with work that launches nothing:
    the framework's own host work (the autograd engine, a library's host-side setup: cuDNN's
    LSTM backward) or the script's (Python between two ops, a CPU-side metric).

    Time lost per step = GPU idle attributed to the timeline cause `other` (a host pause
    longer than the glue between two launching ops, `analysis.timeline`), the profiler's
    share set aside, less the part on the step's input side (`_input_side`: up to the first
    kernel after the batch's last host-to-device copy; on the H200 a Lightning fit's 8.6
    ms/step of this idle sat there, 6 ms before the first convolution, and pinning the
    loader's memory recovered it) and the part before the loop's own chains (an EMA: the
    loop-chain finding's, `rules.memory.loop_launch_ms`), ÷ steps. Only on a trace with its
    unprofiled step measured (membound's capture): elsewhere the profiler's share of the
    host's pauses is not known. Only taking the host out of the step
    recovers it: a CUDA graph of the whole step (remedy `graph_step`). On an H100
    (2026-12-06, `tests/fixtures/h100_real_lstm_lm_truth2`) the word-language LSTM's step of
    6.20 ms held 1.60 ms/step of launch idle and 1.34 of this; capturing the step in one
    graph saved 3.58 ms/step (6.02 -> 2.44, the GPU's own 2.68 ms of work)."""
    if ctx.timing is None:
        # no unprofiled step (an ordinary profiler trace): the profiler's own host time is
        # not told apart from the host's pauses, and this cause is mostly what is left
        return []
    starts, ends = ctx.idle("other")
    total = ctx.idle_ms_per_step("other")
    if not total > 0 or not len(starts):
        return []
    length = ends - starts
    side = _input_side(ctx, starts, ends)
    to_input = total * float(length[side].sum()) / float(length.sum())
    to_loop = loop_launch_ms(ctx, "other")
    lost = total - to_input - to_loop
    if lost <= 0:
        return []
    starts, ends = starts[~side], ends[~side]
    n = len(starts)
    evidence = {
        "gaps_per_step": n / ctx.n_steps,
        "mid_step_syncs_per_step": mid_step_syncs(ctx),
        "backward_syncs_per_step": backward_syncs(ctx),
        "shapes_vary": shapes_vary(ctx),
        "median_gap_us": float(np.median(ends - starts)) if n else 0.0,
        "before_ops_ms_per_step": _before_ops(ctx, starts, ends, lost),
        "left_to_input_side_ms_per_step": to_input,
        "left_to_loop_chains_ms_per_step": to_loop,
    }
    syncs = evidence["mid_step_syncs_per_step"]
    fix = FIX
    owner = loop_owner(ctx.frameworks)
    if owner:
        evidence["loop_owner"] = owner
        fix = (
            f"{owner} runs the training loop, so a CUDA graph of the whole step is not yours "
            "to capture. What is left is less host work per step: fewer hooks and callbacks "
            "that run every step (progress bar, per-step logging), larger batches, or "
            "torch.compile(model) for the Python in the model's own forward."
        )
    elif evidence["shapes_vary"]:
        fix = (
            f"{SHAPES_VARY_FIX} Less host work per step is what is left: fewer ops (skip work "
            "the step does not need), larger batches, or torch.compile(model) for the Python in "
            "the model's own forward."
        )
    elif evidence["backward_syncs_per_step"]:
        fix = (
            f"An op of the backward waits for the GPU "
            f"{evidence['backward_syncs_per_step']:.0f} time(s) a step (a sync from the "
            "autograd engine's thread: a sparse product's backward sorting its indices, "
            "nonzero, boolean-mask indexing), so no CUDA graph can hold the step. Less host "
            "work per step is what is left: fewer ops (skip work the step does not need), "
            "larger batches, or dense ops in place of the one that syncs."
        )
    elif syncs:
        fix = (
            f"The step reads from the GPU at {syncs + 1:.0f} separate points of its work (a "
            "loss or metric .item(), a GradScaler's inf check), so it cannot be captured "
            "whole yet: move those reads to one place, the end of the step (or accumulate on "
            "the GPU). Then: " + FIX
        )
    return [
        ctx.finding(
            code="host-bound",
            title="the GPU waits while the host works between launches (code that launches "
            "nothing)",
            lost_ms=lost,
            evidence=evidence,
            fix=fix,
            spans=ctx.spans((starts, ends)),
        )
    ]
