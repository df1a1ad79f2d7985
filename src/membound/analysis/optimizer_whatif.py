"""What a fused optimizer saves a step: the loop's own timeline, replayed with a fused update.

torch.optim's default Adam, AdamW and SGD step by `_foreach_*` ops (`foreach=None` picks
them on CUDA): one multi-tensor kernel per elementwise op of the update, over every parameter,
with Python between them. AdamW over a ConvNeXt-T's two parameter groups (H100, 2026-12-06,
`tests/fixtures/h100_real_convnext_amp_truth1`) launched 32 kernels a step in 5.2 ms of host
work, 3.5 ms of it Python between the launches: the bias corrections computed per parameter
in lists (1.2 and 0.6 ms), the second group's set-up (0.9 ms). `fused=True` runs the update as
one kernel per group and list chunk, with no such lists. Under a GradScaler it also takes the
inf check on the GPU (`_step_supports_amp_scaling`): `scaler.step` no longer reads it with
`.item()` before the step, a sync every step that reading the loss less often does not remove.
The fused AdamW saved 10.91 and 9.08 ms of that loop's 70.9 and 65.2 ms steps on two hosts,
where the findings' sum had predicted 0.90 and 1.67 (the scaler sync's idle).

`of(ctx)` replays the timeline pass (`analysis.replay`, calibrated to the unprofiled step: the
replay the GPU what-if plays, `gpu_whatif.calibrated_replay`) with:

- **Host.** The optimizer's block, per step the longest run of consecutive launches of
  multi-tensor kernels (calls that launch nothing may sit between them), keeps the host work of
  its first call (the step's set-up before its first launch, which a fused step runs too) and
  loses the rest. Where the update has several parameter groups, the later groups' set-up is
  lost with it: an upper bound of the host part.
- **GPU.** The block's kernels take `FUSED_PASSES / FOREACH_PASSES` of their time: the fused
  update reads and writes each tensor once, the foreach one once per op (passes over the
  parameters' bytes, read from torch.optim's `_multi_tensor_*` and `_fused_*` implementations:
  AdamW 20 against 7, Adam 18 against 7, SGD with momentum 11 against 5).
- **Sync.** Where a GradScaler steps the optimizer (`rules.host_sync.grad_scaler_sync`), the
  syncs between the last kernel launch before the block and the block (the inf check's
  `.item()`) are dropped.

The saving is the replayed step's change, signed. It replaces the findings' sum for the
`fused_optimizer` remedy (`analysis.remedies`), and gives the remedy where no finding names it.
Without a trusted replay, or where the loop's optimizer is fused already or not one
`FOREACH_PASSES` knows, there is no what-if and the sum stays.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from membound.analysis import gpu_whatif
from membound.analysis.fixes import FUSED_OPTIMIZERS

#: torch.optim's step annotation (`Optimizer.step#AdamW.step`): the optimizer's class
STEP_ANNOTATION = re.compile(r"^Optimizer\.step#(\w+)\.step$")
#: passes over the parameters' bytes of one step, by optimizer class (each tensor read or
#: written once counts one pass), in torch.optim's foreach implementation (weight decay on,
#: as the examples' recipes have it) and its fused one. AdamW foreach: weight decay mul_ 2,
#: lerp_ 3, mul_ 2, addcmul_ 3, sqrt 2, div_ 2, add_ 2, addcdiv_ 4; Adam: L2 decay by
#: add 3 in place of mul_ 2, and none without decay (18 taken); SGD: add of the decay 3,
#: mul_ 2, add_ 3, add_ 3. Fused: params, grads and both moments read, params and moments
#: written (Adam, AdamW: 7); params, grads and the momentum read, params and momentum written
#: (SGD: 5)
FOREACH_PASSES = {"AdamW": 20.0, "Adam": 18.0, "SGD": 11.0}
FUSED_PASSES = {"AdamW": 7.0, "Adam": 7.0, "SGD": 5.0}
#: a block shorter than this many multi-tensor launches a step is not an optimizer's update
MIN_LAUNCHES = 4
#: the kernel a foreach op launches
MULTI_TENSOR = "multi_tensor_apply_kernel"


def _step_annotations(ctx):
    """(the trace, the ids of its names that are torch.optim's step annotations): the trace the
    ops came from, else the timeline's; (None, empty) where neither names one."""
    for trace in (getattr(ctx, "op_trace", None), ctx.trace):
        if trace is None:
            continue
        ids = trace.name_ids(lambda n: STEP_ANNOTATION.match(n) is not None)
        if len(ids):
            return trace, ids
    return None, np.zeros(0, dtype=np.int32)


def step_class_at(ctx, host_ts: np.ndarray) -> np.ndarray:
    """Per host time of `host_ts` (µs, the clock of the trace the ops came from): the class of
    the torch.optim step that runs it (its step annotation, `Optimizer.step#RMSpropTF.step`,
    holds the time), '' none. A step's own ops run inside it, whatever the class: a
    hand-written optimizer's per-parameter loop (timm's RMSpropTF) as much as torch.optim's."""
    out = np.full(len(host_ts), "", dtype=object)
    trace, ids = _step_annotations(ctx)
    if trace is None or not len(host_ts):
        return out
    cpu = trace.cpu
    ts = np.asarray(host_ts, dtype=np.float64)
    for row in np.flatnonzero(np.isin(cpu.name, ids)).tolist():
        lo = float(cpu.ts[row])
        inside = (ts >= lo) & (ts <= lo + float(cpu.dur[row]))
        out[inside] = STEP_ANNOTATION.match(trace.names[int(cpu.name[row])]).group(1)
    return out


def optimizer_class(ctx) -> str | None:
    """The class of the optimizer the loop steps by foreach ops (from torch.optim's step
    annotation in the trace its ops came from), or None: no annotation, several classes, a
    fused optimizer's op among the calls, or a class `FOREACH_PASSES` does not know."""
    from membound.analysis.op_calls import call_column

    if len(ctx.calls):
        names = set(call_column(ctx.calls, "name").tolist())
        if any(f in n for n in names for f in FUSED_OPTIMIZERS):
            return None
    trace, ids = _step_annotations(ctx)
    found = {STEP_ANNOTATION.match(trace.names[int(i)]).group(1) for i in ids}
    if len(found) != 1:
        return None
    cls = found.pop()
    return cls if cls in FOREACH_PASSES else None


def optimizers_per_step(ctx) -> int:
    """How many optimizer steps the loop makes a step (a GAN steps two): torch.optim's step
    annotations on the host in the trace the ops came from, over its steps; at least 1."""
    trace, ids = _step_annotations(ctx)
    count = int(np.isin(trace.cpu.name, ids).sum()) if len(ids) else 0
    if not count:
        return 1
    steps = getattr(ctx, "op_steps", None) or len(ctx.steps) or 1
    return max(int(round(count / steps)), 1)


def blocks(trace, r, per_step: int = 1) -> np.ndarray:
    """Per call of replay `r`: the index of the optimizer block it belongs to, -1 none. A block
    is, per step, the longest run of consecutive calls that launch a multi-tensor kernel or
    nothing at all (not a sync), starting with a multi-tensor launch and holding at least
    `MIN_LAUNCHES` of them (the `per_step` longest where the loop steps several optimizers);
    the steps' runs are told apart by where they start among the calls (the k-th of
    `r.steps` equal shares: each step makes about as many calls)."""
    n = len(r.gap)
    first = r.act_start[:-1]
    has = r.act_start[1:] > first
    names = trace.names
    multi = np.zeros(n, dtype=bool)
    if has.any():
        rows = r.act_row[first[has]]
        ids = trace.gpu.name[rows]
        is_multi = {int(i): MULTI_TENSOR in names[int(i)] for i in np.unique(ids)}
        multi[np.flatnonzero(has)] = [is_multi[int(i)] for i in ids]
    quiet = ~has & (r.wait == 0) & ~r.sync_copy
    runs: list[tuple[int, int, int]] = []  # (start, end exclusive, multi-tensor launches)
    i = 0
    while i < n:
        if not multi[i]:
            i += 1
            continue
        j, count, last = i, 0, i
        while j < n and (multi[j] or quiet[j]):
            if multi[j]:
                count += 1
                last = j
            j += 1
        runs.append((i, last + 1, count))
        i = j
    out = np.full(n, -1, dtype=np.int64)
    if not runs:
        return out
    # one block a step: the steps' calls split evenly is enough to tell the steps' runs apart
    # (the longest run of each share of the calls)
    share = n / max(r.steps, 1)
    by_step: dict[int, list[tuple[int, int, int]]] = {}
    for run in runs:
        by_step.setdefault(min(int(run[0] // share), r.steps - 1), []).append(run)
    kept = []
    for step_runs in by_step.values():
        longest = sorted(step_runs, key=lambda run: -run[2])[: max(per_step, 1)]
        kept += [run for run in longest if run[2] >= MIN_LAUNCHES]
    for b, (s, e, _) in enumerate(sorted(kept)):
        out[s:e] = b
    return out


def scaler_syncs(r, block: np.ndarray) -> np.ndarray:
    """Mask over the calls: the syncs (and small blocking D2H copies) between each block's
    start and the last call before it that launched a kernel: the GradScaler's inf check."""
    has = r.act_start[1:] > r.act_start[:-1]
    mask = np.zeros(len(r.gap), dtype=bool)
    starts = np.flatnonzero((block >= 0) & (np.r_[-1, block[:-1]] != block))
    for s in starts.tolist():
        k = s - 1
        while k >= 0 and not has[k]:
            if r.wait[k] == 1 or r.sync_copy[k]:
                mask[k] = True
            k -= 1
    return mask


def of(ctx) -> dict[str, Any] | None:
    """The fused optimizer's replayed saving on `ctx`'s loop (ms a step, signed) and its
    parts, or None where there is no what-if (module doc)."""
    from membound.analysis.rules.host_sync import grad_scaler_sync

    cls = optimizer_class(ctx)
    if cls is None:
        return None
    r = gpu_whatif.calibrated_replay(ctx)
    if r is None:
        return None
    block = blocks(ctx.trace, r, optimizers_per_step(ctx))
    if not (block >= 0).any():
        return None
    in_block = block >= 0
    first = in_block & (np.r_[-1, block[:-1]] != block)
    host = np.where(in_block & ~first, 0.0, 1.0)
    ratio = FUSED_PASSES[cls] / FOREACH_PASSES[cls]
    act_call = np.repeat(np.arange(len(r.gap)), np.diff(r.act_start))
    act = np.where(in_block[act_call] & r.act_kernel, ratio, 1.0)
    scaler = bool(grad_scaler_sync(ctx))
    syncs = scaler_syncs(r, block) if scaler else np.zeros(len(r.gap), dtype=bool)
    drop = syncs if syncs.any() else False
    base = r.step_ms()
    fused = r.step_ms(drop_syncs=drop, host_scale=host, act_scale=act)
    parts = {
        "host_ms": base - r.step_ms(host_scale=host),
        "kernel_ms": base - r.step_ms(act_scale=act),
        "sync_ms": base - r.step_ms(drop_syncs=drop) if syncs.any() else 0.0,
    }
    own, gap = r.host_work()
    steps = max(r.steps, 1)
    return {
        "optimizer": cls,
        "saving_ms": round(base - fused, 4),
        **{k: round(v, 4) for k, v in parts.items()},
        "launches_per_step": round(float((in_block & (np.diff(r.act_start) > 0)).sum()) / steps, 1),
        "block_host_ms_per_step": round(float((own + gap)[in_block].sum()) / steps / 1e3, 4),
        "block_kernel_ms_per_step": round(
            float(r.act_dur[in_block[act_call] & r.act_kernel].sum()) / steps / 1e3, 4
        ),
        "grad_scaler_sync": scaler,
        "scaler_syncs_per_step": round(float(syncs.sum()) / steps, 1),
    }


def note(w: dict[str, Any]) -> str:
    """One line for the report's notes."""
    sync = (
        f", the GradScaler's inf check off the host {w['sync_ms']:.2f}"
        if w.get("grad_scaler_sync")
        else ""
    )
    return (
        f"fused optimizer what-if (the timeline replayed with {w['optimizer']}(fused=True)): "
        f"its foreach update launches {w['launches_per_step']:.0f} kernels a step in "
        f"{w['block_host_ms_per_step']:.2f} ms of host work and "
        f"{w['block_kernel_ms_per_step']:.2f} ms of kernels; fused, the step would change by "
        f"{-w['saving_ms']:+.2f} ms (host {w['host_ms']:.2f}, kernels {w['kernel_ms']:.2f}"
        f"{sync}, each alone)"
    )
