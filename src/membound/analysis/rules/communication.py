"""Communication: `exposed-communication` (per rank, and restated across ranks) and
`straggler-rank` (across ranks).

DDP/FSDP hide gradient communication behind backward compute on another stream; when the
compute is too short (small per-GPU batch, a large model) the all-reduce runs alone and the
step waits for it. The collectives, their steps, sizes, exposed time and bus bandwidth come
from `membound.analysis.collectives`; the rank merge (waiting for peers, stragglers) from
`membound.analysis.ranks`, whose `RankContext` the cross-rank rules read.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from membound.analysis.collectives import collectives, summarize
from membound.analysis.findings import Finding, rank_rule, rule
from membound.device.lookup import interconnect_for

EXPOSED_FIX = (
    "Give communication compute to hide behind: a larger per-GPU batch, or gradient "
    "accumulation with DDP's no_sync() on all but the last micro-step; send fewer "
    "bytes (DDP comm hook bf16_compress_hook / fp16_compress_hook halves them); "
    "tune bucket_cap_mb so the first buckets start during backward; with FSDP, "
    "keep backward_prefetch on."
)


@rule("exposed-communication")
def exposed_communication(ctx):
    """NCCL collective time not overlapped with compute kernels on other streams.

    Time lost per step = Σ over NCCL kernels in the steps of (kernel time − time any other
    kernel on this GPU ran beside it) ÷ steps. This includes waiting for slower ranks,
    which the merged multi-rank report separates out as a straggler.
    """
    cols = [c for c in collectives(ctx.trace, ctx.steps) if c.on_gpu and c.step >= 0]
    if not cols:
        return []
    exposed = ctx.per_step(sum(c.exposed_us for c in cols) / 1e3)
    if exposed <= 0:
        return []
    ceiling, source = interconnect_for(ctx.ceilings, ctx.trace.device_name)
    comm = ctx.per_step(sum(c.dur_us for c in cols) / 1e3)
    evidence = {
        "communication_ms_per_step": comm,
        "exposed_ms_per_step": exposed,
        "overlapped_fraction": 1 - exposed / comm if comm > 0 else 0.0,
        "collectives": summarize(cols, ctx.n_steps, ceiling),
        "ceiling_source": source
        or "none: run `membound roofline` on a machine with 2+ GPUs to measure it",
        "note": "kernel time includes waiting for late ranks; the merged rank report separates it",
    }
    return [
        ctx.finding(
            "exposed-communication",
            "the GPU waits on collective communication (NCCL) with no compute to hide it",
            exposed,
            evidence,
            EXPOSED_FIX,
            spans=[(c.start_us, c.end_us) for c in cols if c.exposed_us > 0][:2000],
        )
    ]


@rank_rule("exposed-communication")
def exposed_across_ranks(ctx):
    """The ranks' `exposed-communication`, restated without the waiting for late ranks.

    Time lost per step = mean over ranks of Σ per collective of min(its exposed time, its
    time after the last rank arrived) ÷ steps: the waiting is the straggler's, not the
    network's.
    """
    old = next((f for f in ctx.merged.findings if f.code == "exposed-communication"), None)
    rows = ctx.ranks
    exposed = float(np.mean([r.exposed_comm_ms_per_step for r in rows])) if rows else 0.0
    if old is None or exposed <= 0:
        return []
    ev = dict(old.evidence)
    ev["exposed_ms_per_step"] = exposed
    ev["waiting_for_late_ranks_ms_per_step"] = float(np.mean([r.wait_ms_per_step for r in rows]))
    ev["per_rank_exposed_ms_per_step"] = {r.rank: r.exposed_comm_ms_per_step for r in rows}
    ev["collectives"] = ctx.collectives
    ev["ceiling_source"] = ctx.interconnect_source or ev.get("ceiling_source")
    step = ctx.merged.mean_step_ms
    return [
        dataclasses.replace(
            old,
            time_lost_ms_per_step=exposed,
            share_of_step=exposed / step if step > 0 else 0.0,
            evidence=ev,
        )
    ]


@rank_rule("straggler-rank")
def straggler_rank(ctx):
    """One rank holds every other rank back (`analysis.ranks` finds the stragglers).

    Time lost per step = the median over steps of the straggler's compute time (step wall −
    waiting for peers) above the other ranks' median: the time every other rank waits for it.
    """
    compute = {r.rank: r.compute_ms_per_step for r in ctx.ranks}
    return [
        Finding(
            code="straggler-rank",
            title=f"rank {s.rank} is late: the other ranks wait for it in every collective",
            time_lost_ms_per_step=s.held_back_ms_per_step,
            share_of_step=s.share_of_step,
            evidence={
                "rank": s.rank,
                "held_back_ms_per_step": s.held_back_ms_per_step,
                "others_wait_ms_per_step": s.others_wait_ms_per_step,
                "arrived_last_fraction": s.late_fraction,
                "method": s.method,
                "compute_ms_per_step": compute,
            },
            fix=(
                f"Find what rank {s.rank} does that the others do not (rank-specific "
                "logging, checkpointing or evaluation on one rank, uneven data loading or "
                "sequence lengths, a slower GPU or a shared CPU): move it off the step, "
                "balance the shards, or run it asynchronously."
            ),
        )
        for s in ctx.stragglers
    ]
