"""`input-starved`: the GPU idles while the host waits for the next batch."""

from __future__ import annotations

import numpy as np

from membound.analysis import loader_cpu
from membound.analysis.findings import rule
from membound.analysis.rules.copies import h2d_copies
from membound.trace.model import CPU_OP, DATALOADER, DATALOADER_ROLES, DATALOADER_WORKERS

#: ops that take one row of a tensor: a map-style dataset of tensors (`TensorDataset`)
#: indexed row by row, then stacked by the default collate
ROW_OPS = ("aten::select", "aten::index", "aten::index_select")
#: row ops per batch from which a single-process loader is said to collate row by row (the
#: tabular MLP of examples/real: 2048 a batch, two tensors x 1024 rows)
PER_ROW = 32
_ADD_WORKERS = "add DataLoader workers (num_workers>0, persistent_workers=True)."
#: MB of batch copied in per second of the training thread's wait for it, below which a
#: loader with workers is said to be worker-bound: its workers cannot build the batches fast
#: enough (the wait is their work, not the batch's way in); below which a loader without
#: workers builds its batches item by item (`item_bound`). Every worker-fed loader recorded
#: before 2026-12-06 waited at 3,700-34,000 MB/s (pageable batches of 6-39 MB: the copy and
#: the handing over); PyTorch's examples/mnist (one worker turning 64 PIL images into tensors
#: one by one, 0.2 MB a batch) at 26, where 4 workers saved 6.3 of a 9.2 ms step and
#: membound's prefetcher 2.4 (H100, `tests/fixtures/h100_real_mnist_cnn_oos1`)
WORKER_BOUND_MB_S = 500.0


def _batch_mb_per_step(ctx) -> float | None:
    """MB copied host-to-device per step (the batch's way in); None where the copies'
    sizes were not recorded."""
    nbytes = ctx.trace.gpu.bytes[h2d_copies(ctx, pageable=None)]
    if not len(nbytes) or np.any(nbytes < 0):
        return None
    return float(nbytes.sum()) / 1e6 / ctx.n_steps


def _host_work_ms(ctx) -> float | None:
    """The training thread's CPU a step, with its autograd threads' (backward's host work),
    unprofiled (`StepTiming.launchers_cpu`, else the training thread's alone); None where
    not measured."""
    t = ctx.timing
    if t is None:
        return None
    work = t.launchers_cpu
    if work is None:
        work = t.thread_cpu_ms.get(t.unprofiled_phase)
    return float(work) if work is not None else None


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
    is_row = np.isin(cpu.name[ops], trace.name_ids(lambda n: n in ROW_OPS))
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
    mb = _batch_mb_per_step(ctx)
    wait_s = evidence["dataloader_ms_per_step"] / 1e3
    # few bytes for a long wait: the wait is work per item, not the batch's way in
    slow = mb is not None and wait_s > 0 and mb / wait_s < WORKER_BOUND_MB_S
    worker_bound = workers and slow
    if workers and mb is not None:
        evidence["batch_mb_per_step"] = mb
        evidence["worker_bound"] = worker_bound
    cores = ctx.loader_cpu if workers else None
    if worker_bound:
        # a prefetch thread fetches the next batch while the training thread works: it hides
        # the wait behind the step's own host work, never more than the wait
        work = _host_work_ms(ctx)
        by_remedy = {} if work is None else {"prefetch": min(lost, work)}
        if cores is not None:
            # more workers: no further than the cores left to them allow (`analysis.loader_cpu`)
            evidence.update(cores.evidence())
            by_remedy["workers"] = loader_cpu.workers_saving(cores, ctx.reference_step_ms, lost)
        if by_remedy:
            evidence["saving_by_remedy"] = by_remedy
    rows = None if workers else _row_ops_per_batch(getattr(ctx, "op_trace", None))
    per_row = rows is not None and rows >= PER_ROW
    if rows is not None:
        evidence["row_ops_per_batch"] = rows
        evidence["per_row_collate"] = per_row
    if not workers and not per_row and slow and "transformers" not in ctx.frameworks:
        # a loader on the training thread that takes its time over few bytes builds each
        # batch item by item in Python (a dataset of numpy rows under the default collate:
        # facebookresearch/dlrm's, 25 ms for 1 MB a batch, where batches indexed and collated
        # as arrays saved 28.41 ms/step, H100, 2026-12-06); a Hugging Face pipeline's items
        # (datasets rows, a padding collator) cannot be indexed by batch
        evidence["batch_mb_per_step"] = mb
        evidence["item_bound"] = True
    if worker_bound and cores is not None and cores.saturated:
        fix = (
            f"The workers cannot build the batches fast enough, and the host has no core to "
            f"spare for more: {cores.workers_working} "
            f"{'worker keeps' if cores.workers_working == 1 else 'workers keep'} "
            f"{cores.workers_busy:.1f} of "
            f"its {cores.cores:g} cores busy ({cores.workers_cpu_ms:.0f} ms of CPU a step), the "
            f"training process {cores.main_busy:.1f} more. More workers would only share them. "
            "Make each item cheaper: decode and augment on the GPU (torchvision.io.decode_jpeg "
            "with device='cuda', transforms on whole batches there), lighter CPU transforms, "
            "or a faster decoder; or give the job more cores."
        )
    elif worker_bound:
        fix = (
            f"The workers cannot build the batches fast enough: the training thread waits "
            f"{evidence['dataloader_ms_per_step']:.2f} ms a step for {mb * 1e3:.0f} KB, so the "
            "wait is the workers' own work per batch (decoding, per-item transforms, "
            "collating), not the batch's way in. Raise num_workers (with "
            "persistent_workers=True), or make each item cheaper (transforms on whole "
            "batches, on the GPU). membound.data.prefetch(loader) overlaps the wait with the "
            "step's own host work only."
        )
    elif workers:
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
    elif evidence.get("item_bound"):
        fix = (
            f"The batch is built on the training thread (num_workers=0), item by item: it "
            f"waits {evidence['dataloader_ms_per_step']:.2f} ms a step for "
            f"{evidence['batch_mb_per_step'] * 1e3:.0f} KB, Python's work per sample "
            "(__getitem__, then the collate of the samples). Where the items are rows of "
            "arrays or tensors, index whole batches (DataLoader(dataset, "
            "sampler=BatchSampler(RandomSampler(dataset), batch_size, drop_last=True), "
            "batch_size=None), a dataset whose __getitem__ takes the list of indices) and "
            f"build the batch from arrays at once; else {_ADD_WORKERS}"
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
