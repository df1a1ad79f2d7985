"""`exposed-communication`: collective time the GPU spends on NCCL with no compute beside it.

DDP/FSDP hide gradient communication behind backward compute on another stream; when the
compute is too short (small per-GPU batch, a large model) the all-reduce runs alone and the
step waits for it. Per rank, per step:

- **communication** = union of NCCL kernels (`ncclDevKernel_*` / `ncclKernel_*`);
- **exposed** = that union minus the union of every other kernel on the same GPU (compute
  on other streams overlapping it);
- **bus bandwidth** of each collective = its bytes ÷ its kernel time × the nccl-tests factor
  (2(n−1)/n for all-reduce). Bytes come from the collective's recorded args (`In/Out msg
  nelems` × dtype size). A kernel's time includes waiting for late ranks, so one rank's
  figure is a lower bound; the merged multi-rank report uses the last-arriving rank's time.

`collectives()` is shared with `membound.analysis.ranks`, which also reads CPU-only (gloo)
traces: there the collectives are the `gloo:*` host spans and nothing is "exposed".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from membound.analysis import intervals as iv
from membound.analysis.findings import Finding, rule
from membound.trace.load import KERNEL, USER_ANNOTATION, Trace

HOST_COLLECTIVE_PREFIXES = ("gloo:",)


def is_nccl_kernel(name: str) -> bool:
    return name.startswith(("ncclDevKernel", "ncclKernel"))


@dataclass
class Collective:
    """One collective on one rank."""

    kind: str  # "allreduce", "allgather", ...
    start_us: float
    dur_us: float
    step: int  # position in the steps list, -1 outside every step
    on_gpu: bool
    exposed_us: float  # GPU time with no other kernel running (0 for host-side collectives)
    bytes: int | None = None
    group_size: int | None = None
    dtype: str | None = None
    wait_us: float = 0.0  # waiting for a later rank (set by the rank merge)
    seq: int | None = None  # the process group's collective sequence number, when recorded
    process_group: str | None = None

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us


def collectives(trace: Trace, steps, records=None) -> list[Collective]:
    """The trace's collectives in time order: NCCL kernels on the main GPU, else (CPU-only
    traces) gloo host spans; each assigned to its step and sized from `records`
    (`membound.trace.distributed.read_comm_records`; read from the file when None)."""
    from membound.trace.distributed import collective_kind

    gpu, cpu = trace.gpu, trace.cpu
    nccl = trace.name_ids(is_nccl_kernel)
    out: list[Collective] = []
    if len(gpu) and len(nccl):
        device = _main_device(gpu)
        on = gpu.device == device
        comm = on & (gpu.kind == KERNEL) & np.isin(gpu.name, nccl)
        compute = on & (gpu.kind == KERNEL) & ~comm
        busy = iv.union(gpu.ts[compute], gpu.ts[compute] + gpu.dur[compute])
        idx = np.flatnonzero(comm)
        idx = idx[np.argsort(gpu.ts[idx], kind="stable")]
        for i in idx:
            s, d = float(gpu.ts[i]), float(gpu.dur[i])
            span = (np.array([s]), np.array([s + d]))
            exposed = d - iv.total(iv.intersect(span, busy))
            kind = collective_kind(trace.names[gpu.name[i]])
            out.append(Collective(kind, s, d, -1, True, max(exposed, 0.0)))
    else:
        host = trace.name_ids(lambda n: n.startswith(HOST_COLLECTIVE_PREFIXES))
        if len(host):
            sel = np.isin(cpu.name, host) & (cpu.kind == USER_ANNOTATION)
            idx = np.flatnonzero(sel)
            idx = idx[np.argsort(cpu.ts[idx], kind="stable")]
            for i in idx:
                kind = collective_kind(trace.names[cpu.name[i]])
                out.append(Collective(kind, float(cpu.ts[i]), float(cpu.dur[i]), -1, False, 0.0))
    if not out:
        return out
    _assign_steps(out, steps)
    if records is None:
        records = _records(trace)
    _attach_sizes(out, records or [])
    return out


_CACHE_KEY = "membound.comm_records"


def _records(trace: Trace) -> list:
    """The trace file's collective records, read once per loaded trace (the rule and the
    rank merge both need them)."""
    meta = trace.metadata if isinstance(trace.metadata, dict) else {}
    if _CACHE_KEY not in meta:
        from membound.trace.distributed import read_comm_records

        meta[_CACHE_KEY] = read_comm_records(trace.path) if trace.path else []
    return meta[_CACHE_KEY]


def _assign_steps(cols: list[Collective], steps) -> None:
    if not steps:
        return
    starts = np.array([s.start_us for s in steps])
    ends = np.array([s.end_us for s in steps])
    ts = np.array([c.start_us for c in cols])
    k = np.searchsorted(starts, ts, side="right") - 1
    for c, j in zip(cols, k, strict=True):
        if j >= 0 and c.start_us < ends[j]:
            c.step = int(j)


def _attach_sizes(cols: list[Collective], records) -> None:
    """Sizes from the recorded args: a kernel's own args match it by start time; host records
    match the collectives of the same kind in issue order (NCCL runs one stream's
    collectives in the order they were issued)."""
    on_kernel = {round(r.ts, 3): r for r in records if r.on_kernel}
    queues: dict[str, list] = {}
    host = sorted((r for r in records if not r.on_kernel), key=lambda r: r.ts)
    events = [(r.ts, 0, r) for r in host] + [(c.start_us, 1, c) for c in cols]
    events.sort(key=lambda e: (e[0], e[1]))
    for _, what, item in events:
        if what == 0:
            queues.setdefault(item.name, []).append(item)
            continue
        rec = on_kernel.get(round(item.start_us, 3))
        if rec is None:
            q = queues.get(item.kind)
            rec = q.pop(0) if q else None
        if rec is not None:
            item.bytes, item.group_size, item.dtype = rec.bytes, rec.group_size, rec.dtype
            item.seq, item.process_group = rec.seq, rec.process_group


def _main_device(gpu) -> int:
    values, counts = np.unique(gpu.device, return_counts=True)
    return int(values[np.argmax(counts)])


def bus_bandwidth(c: Collective, ranks: int | None = None, dur_us: float | None = None):
    """nccl-tests bus bandwidth (bytes/s) of one collective, or None without its size."""
    from membound.device.interconnect import bus_factor

    n = ranks or c.group_size
    d = dur_us if dur_us is not None else c.dur_us
    if not c.bytes or not n or d <= 0:
        return None
    return c.bytes / (d * 1e-6) * bus_factor(c.kind, n)


def summarize(cols: list[Collective], n_steps: int, ceiling=None) -> list[dict]:
    """Per collective kind: calls per step, bytes per call, kernel ms, bus bandwidth
    (median over calls) and its fraction of the measured all-reduce bus bandwidth."""
    out = []
    for kind in sorted({c.kind for c in cols}):
        these = [c for c in cols if c.kind == kind]
        sizes = [c.bytes for c in these if c.bytes]
        bws = [b for b in (bus_bandwidth(c) for c in these) if b]
        row = {
            "collective": kind,
            "calls_per_step": len(these) / max(n_steps, 1),
            "bytes_per_call": float(np.median(sizes)) if sizes else None,
            "median_ms": float(np.median([c.dur_us for c in these])) / 1e3,
            "exposed_ms_per_step": sum(c.exposed_us for c in these) / 1e3 / max(n_steps, 1),
            "bus_bandwidth_gbs": float(np.median(bws)) / 1e9 if bws else None,
            "ceiling_gbs": None,
            "fraction_of_ceiling": None,
        }
        peak = getattr(ceiling, "allreduce_bus_bandwidth", None) if ceiling else None
        if peak and row["bus_bandwidth_gbs"] is not None:
            row["ceiling_gbs"] = peak / 1e9
            row["fraction_of_ceiling"] = row["bus_bandwidth_gbs"] * 1e9 / peak
        out.append(row)
    return out


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
    from membound.device.interconnect import ceiling_for

    ceiling, source = ceiling_for(ctx.ceilings, ctx.trace.device_name)
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
        Finding(
            code="exposed-communication",
            title="the GPU waits on collective communication (NCCL) with no compute to hide it",
            time_lost_ms_per_step=exposed,
            share_of_step=ctx.share(exposed),
            evidence=evidence,
            fix=(
                "Give communication compute to hide behind: a larger per-GPU batch, or gradient "
                "accumulation with DDP's no_sync() on all but the last micro-step; send fewer "
                "bytes (DDP comm hook bf16_compress_hook / fp16_compress_hook halves them); "
                "tune bucket_cap_mb so the first buckets start during backward; with FSDP, "
                "keep backward_prefetch on."
            ),
            spans=[(c.start_us, c.end_us) for c in cols if c.exposed_us > 0][:2000],
        )
    ]
