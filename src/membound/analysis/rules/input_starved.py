"""`input-starved`: the GPU idles while the host waits for the next batch."""

from __future__ import annotations

import numpy as np

from membound.analysis.findings import rule
from membound.trace.model import CPU_OP, DATALOADER, DATALOADER_ROLES, DATALOADER_WORKERS

#: ops that take one row of a tensor: a map-style dataset of tensors (`TensorDataset`)
#: indexed row by row, then stacked by the default collate
ROW_OPS = ("aten::select", "aten::index", "aten::index_select")
#: row ops per batch from which a single-process loader is said to collate row by row (the
#: tabular MLP of examples/real: 2048 a batch, two tensors x 1024 rows)
PER_ROW = 32
_ADD_WORKERS = "add DataLoader workers (num_workers>0, persistent_workers=True)."


def _row_ops_per_batch(trace) -> float | None:
    """The median count of `ROW_OPS` inside a single-process loader's `__next__` (CPU ops of
    its thread within the span), in a trace that recorded CPU ops; None without them."""
    if trace is None:
        return None
    cpu = trace.cpu
    spans = np.flatnonzero(cpu.role == DATALOADER)
    ops = np.flatnonzero(cpu.kind == CPU_OP)
    if not len(spans) or not len(ops):
        return None
    wanted = {i for i, n in enumerate(trace.names) if n in ROW_OPS}
    is_row = np.isin(cpu.name[ops], list(wanted)) if wanted else np.zeros(len(ops), dtype=bool)
    counts = []
    for i in spans.tolist():
        start, end = cpu.ts[i], cpu.ts[i] + cpu.dur[i]
        inside = (cpu.tid[ops] == cpu.tid[i]) & (cpu.ts[ops] >= start) & (cpu.ts[ops] < end)
        counts.append(int((inside & is_row).sum()))
    return float(np.median(counts))


@rule("input-starved")
def input_starved(ctx):
    """GPU idle while the host is inside a DataLoader `__next__`.

    Time lost per step = GPU idle attributed to the timeline cause `dataloader` (idle
    instants during which some host thread was inside
    `enumerate(DataLoader)#_*DataLoaderIter.__next__`), ÷ steps. A single-process loader
    whose `__next__` takes rows one at a time (`ROW_OPS`, at least `PER_ROW` a batch in the
    trace of CPU ops) is said to collate per row: index whole batches instead.
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
    evidence = {
        "dataloader_ms_per_step": float(cpu.dur[sel].sum()) / 1e3 / ctx.n_steps,
        "gpu_idle_in_dataloader_ms_per_step": lost,
        "loader": names[0] if names else "",
        "multiprocess_workers": workers,
    }
    rows = None if workers else _row_ops_per_batch(getattr(ctx, "op_trace", None))
    per_row = rows is not None and rows >= PER_ROW
    if rows is not None:
        evidence["row_ops_per_batch"] = rows
        evidence["per_row_collate"] = per_row
    if workers:
        fix = (
            "Raise num_workers/prefetch_factor, move decoding/augmentation off the host (e.g. "
            "uint8 batches normalized on the GPU with membound.data.Normalize); overlap loading "
            "with compute via membound.data.prefetch(loader)."
        )
    elif per_row:
        fix = (
            f"The loader takes its rows one at a time ({rows:.0f} row ops a batch) and "
            "stacks them (a TensorDataset under the default collate): index whole batches, "
            "DataLoader(dataset, sampler=BatchSampler(RandomSampler(dataset), batch_size, "
            "drop_last=True), batch_size=None), or keep the tensors on the GPU and index "
            f"them there; or {_ADD_WORKERS}"
        )
    else:
        fix = (
            "The batch is built on the training thread (num_workers=0), where a prefetch thread "
            f"would share its interpreter: {_ADD_WORKERS}"
        )
    return [
        ctx.finding(
            code="input-starved",
            title="the GPU waits for the DataLoader to produce the next batch",
            lost_ms=lost,
            evidence=evidence,
            fix=fix,
            spans=ctx.spans(idle),
        )
    ]
