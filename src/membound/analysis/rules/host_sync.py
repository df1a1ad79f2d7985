"""`host-sync`: the GPU idles after the host blocked on a synchronisation."""

from __future__ import annotations

from typing import Any

import numpy as np

from membound.analysis.findings import ranked, rule
from membound.analysis.fixes import FUSED_OPTIMIZERS, sync_fix
from membound.analysis.replay import Replay
from membound.trace.model import SYNC, SYNC_OP

#: sync sites named in the evidence, largest saving first
MAX_SITES = 5
#: the replay predicts a loop whose GPU is busy at least this share of the unprofiled step.
#: Measured by intervention on the H200 (benchmarks/results/truth.csv): where the GPU was
#: busy 95-97% of the step (eager GPT-2 in three runs, compiled GPT-2 in two, the fp32
#: ResNet-50) its predictions came within issue 15's tolerance in all 6 runs it predicted;
#: where the host set more of the pace (the HF Trainer, 73-85% busy; Lightning, 58-66%) it
#: missed 7 of the 9 fixes measured, 6 of them over-predicted (3.35 ms/step for the NaN
#: filter's syncs against -0.76 measured): where a host-bound loop's slack lies decides what
#: a sync costs, and one cost per call taken off evenly does not locate it.
GPU_BOUND_SHARE = 0.9
#: ... and on one stream: the replay does not model the events that order one stream's work
#: after another's (`Replay.streams_busy`). On the H200 the ResNet-50 whose prefetcher copies
#: on a side stream replayed 17.27 ms/step for its syncs (the next step's copies overlapped
#: with compute once no sync held them back, which the prefetcher's event forbids), where the
#: idle after them was 0.21


@rule("host-sync")
def host_sync(ctx):
    """GPU idle caused by the host synchronising (`.item()`, `.cpu()`, `synchronize()`).

    Time lost per step, where the GPU is busy most of the step (`GPU_BOUND_SHARE`) on one
    stream: what the
    step would take without the loop's syncs, replayed
    (`analysis.replay`: the timeline pass's calls and GPU work played again with every sync's
    wait removed, calibrated on the step membound timed without the profiler). That counts
    the refill after each sync too: the GPU starved while the host issues the next ops no
    faster than they run. Elsewhere, or without a calibrated replay (no unprofiled timing,
    no runtime calls, a replay that does not give the recorded step, or no cost per call that reproduces the
    unprofiled step): the GPU idle attributed to the
    timeline cause `sync` (from the start of a sync call until the GPU next starts work) ÷
    steps.
    """
    idle = ctx.idle("sync")
    idle_lost = ctx.idle_ms_per_step("sync")
    replayed = _replayed(ctx)
    lost = replayed["saving_ms_per_step"] if replayed else idle_lost
    if lost <= 0:
        return []
    t = ctx.trace
    counts: dict[str, float] = {}
    for table, sync in ((t.runtime, t.runtime.call == SYNC), (t.cpu, t.cpu.role == SYNC_OP)):
        sel = sync & ctx.in_window(table.ts)
        for i, c in zip(*np.unique(table.name[sel], return_counts=True), strict=False):
            counts[t.names[int(i)]] = c / ctx.n_steps
    scaler = grad_scaler_sync(ctx)
    evidence: dict[str, Any] = {
        "syncs_per_step": counts,
        "gpu_idle_after_sync_ms_per_step": idle_lost,
        "grad_scaler_sync": scaler,
    }
    fix = sync_fix(ctx.frameworks, grad_scaler=scaler)
    if replayed:
        evidence["replay"] = replayed
        site, ms = next(iter(replayed["sites_ms_per_step"].items()), (None, 0.0))
        if site and ms > 0:
            fix += (
                f" Replayed without the profiler, the sync after {site} alone costs {ms:.2f} "
                "ms/step (the wait and the GPU's refill after it)."
            )
    return [
        ctx.finding(
            code="host-sync",
            title="the host waits on the GPU (item()/cpu()/synchronize) and the GPU then waits on the host",
            lost_ms=lost,
            evidence=evidence,
            fix=fix,
            spans=ctx.spans(idle),
        )
    ]


#: ops of a GradScaler's unscale and scale update; a fused optimizer (`fixes.FUSED_OPTIMIZERS`)
#: takes its inf check on the GPU (`_step_supports_amp_scaling`: no found_inf.item() in
#: scaler.step)
SCALER_OPS = ("aten::_amp_foreach_non_finite_check_and_unscale_", "aten::_amp_update_scale_")


def grad_scaler_sync(ctx) -> bool:
    """Whether the step runs a GradScaler with a non-fused optimizer: its `scaler.step` then
    reads the inf check on the host every step (a timm ConvNeXt under --amp on an H100,
    2026-12-06: AdamW(fused=True) saved 10.91 ms of a 70.88 ms step, bf16 autocast without
    a scaler 14.63, reading the loss every 100 steps nothing)."""
    from membound.analysis.op_calls import call_column

    if not len(ctx.calls):
        return False
    names = set(call_column(ctx.calls, "name").tolist())
    if not names & set(SCALER_OPS):
        return False
    return not any(f in n for n in names for f in FUSED_OPTIMIZERS)


def _replayed(ctx) -> dict[str, Any] | None:
    """The replay's figures (`analysis.replay`), or None where it cannot be calibrated."""
    timing = ctx.timing
    if timing is None or not timing.unprofiled_median_ms or not ctx.steps:
        return None
    busy = sum(s.busy_ms for s in ctx.steps) / len(ctx.steps)
    if busy < GPU_BOUND_SHARE * timing.unprofiled_median_ms:
        return None
    r = Replay.from_trace(ctx.trace, ctx.steps)
    if r is None or not ((r.wait == 1) | r.sync_copy).any() or r.streams_busy() > 1:
        return None
    if not r.faithful() or not r.calibrate(timing.unprofiled_median_ms):
        return None
    base = r.step_ms()
    without = r.step_ms(drop_syncs=True)
    sites = {name: base - r.step_ms(drop_syncs=m) for name, m in r.sync_sites(ctx.trace).items()}
    top = sorted(sites.items(), key=lambda kv: kv[1], reverse=True)[:MAX_SITES]
    return {
        "step_ms_as_profiled": round(r.as_profiled_ms, 4),
        "profiled_step_ms": round(r.profiled_ms, 4),
        "step_ms": round(base, 4),
        "step_ms_without_syncs": round(without, 4),
        "saving_ms_per_step": max(base - without, 0.0),
        "profiler_cost_per_call_us": round(r.cost_per_call, 3),
        "steps_replayed": r.steps,
        # what dropping only the syncs after each kernel saves (they interact: the sum of
        # the sites need not be the whole)
        "sites_ms_per_step": {name: round(ms, 4) for name, ms in top},
    }


def priced_by_replay(findings: list, sync_ms: float, step_ms: float | None) -> list:
    """`findings` with the `host-sync` finding that names a GradScaler's inf check priced by
    the fused optimizer's replay of that sync alone (`analysis.optimizer_whatif`: `sync_ms`),
    where that is more than its idle: a fused optimizer or bf16 autocast removes the sync and
    the refill after it, which the idle leaves out where the replay is gated off
    (`GPU_BOUND_SHARE`). Syncing less keeps the finding's own figure (`saving_by_remedy`):
    it leaves the scaler's sync where it is. Ranked again."""
    for f in findings:
        ev = f.evidence or {}
        lost = float(f.time_lost_ms_per_step or 0.0)
        if f.code != "host-sync" or not ev.get("grad_scaler_sync") or not sync_ms > lost:
            continue
        f.evidence = {
            **ev,
            "saving_by_remedy": {"sync_less": round(lost, 4)},
            "scaler_sync_replayed_ms_per_step": round(sync_ms, 4),
        }
        f.time_lost_ms_per_step = sync_ms
        if step_ms:
            f.share_of_step = sync_ms / step_ms
            f.expected_step_ms_after_fix = step_ms - sync_ms
        f.fix = f.fix.rstrip() + (
            f" Replayed without the profiler, the scaler's sync alone costs {sync_ms:.2f} "
            "ms/step (the wait and the GPU's refill after it); reading the loss less often "
            f"saves {lost:.2f} of it at most."
        )
    return ranked(findings)
