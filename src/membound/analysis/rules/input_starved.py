"""`input-starved`: the GPU idles while the host waits for the next batch."""

from __future__ import annotations

import numpy as np

from membound.analysis.findings import rule
from membound.trace.model import DATALOADER_ROLES, DATALOADER_WORKERS


@rule("input-starved")
def input_starved(ctx):
    """GPU idle while the host is inside a DataLoader `__next__`.

    Time lost per step = GPU idle attributed to the timeline cause `dataloader` (idle
    instants during which some host thread was inside
    `enumerate(DataLoader)#_*DataLoaderIter.__next__`), ÷ steps.
    """
    idle = ctx.idle("dataloader")
    lost = ctx.idle_ms_per_step("dataloader")
    if lost <= 0:
        return []
    t = ctx.trace
    cpu = t.cpu
    sel = np.isin(cpu.role, DATALOADER_ROLES) & ctx.in_window(cpu.ts)
    names = sorted({t.names[int(i)] for i in np.unique(cpu.name[sel])})
    workers = bool(np.any(cpu.role[sel] == DATALOADER_WORKERS))
    return [
        ctx.finding(
            code="input-starved",
            title="the GPU waits for the DataLoader to produce the next batch",
            lost_ms=lost,
            evidence={
                "dataloader_ms_per_step": float(cpu.dur[sel].sum()) / 1e3 / ctx.n_steps,
                "gpu_idle_in_dataloader_ms_per_step": lost,
                "loader": names[0] if names else "",
                "multiprocess_workers": workers,
            },
            fix=(
                (
                    "Add DataLoader workers (num_workers>0) and persistent_workers=True; "
                    if not workers
                    else "Raise num_workers/prefetch_factor, move decoding/augmentation off the "
                    "host (e.g. uint8 batches normalized on the GPU with membound.data.Normalize); "
                )
                + "overlap loading with compute via membound.data.prefetch(loader)."
            ),
            spans=ctx.spans(idle),
        )
    ]
