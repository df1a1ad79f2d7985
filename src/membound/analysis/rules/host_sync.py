"""`host-sync`: the GPU idles after the host blocked on a synchronisation."""

from __future__ import annotations

import numpy as np

from membound.analysis.findings import rule
from membound.analysis.fixes import sync_fix
from membound.trace.model import SYNC, SYNC_OP


@rule("host-sync")
def host_sync(ctx):
    """GPU idle caused by the host synchronising (`.item()`, `.cpu()`, `synchronize()`).

    Time lost per step = GPU idle attributed to the timeline cause `sync`: idle from the
    start of a sync call (`cudaStreamSynchronize`, `cudaDeviceSynchronize`,
    `cudaEventSynchronize`, `aten::item`, `aten::_local_scalar_dense`) until the GPU next
    starts work — the queue drained, the GPU waits for Python to issue more — ÷ steps.
    """
    idle = ctx.idle("sync")
    lost = ctx.idle_ms_per_step("sync")
    if lost <= 0:
        return []
    t = ctx.trace
    counts: dict[str, float] = {}
    for table, sync in ((t.runtime, t.runtime.call == SYNC), (t.cpu, t.cpu.role == SYNC_OP)):
        sel = sync & ctx.in_window(table.ts)
        for i, c in zip(*np.unique(table.name[sel], return_counts=True), strict=False):
            counts[t.names[int(i)]] = c / ctx.n_steps
    return [
        ctx.finding(
            code="host-sync",
            title="the host waits on the GPU (item()/cpu()/synchronize) and the GPU then waits on the host",
            lost_ms=lost,
            evidence={"syncs_per_step": counts, "gpu_idle_after_sync_ms_per_step": lost},
            fix=sync_fix(ctx.frameworks),
            spans=ctx.spans(idle),
        )
    ]
