"""Collectives on one rank: NCCL kernels (GPU traces) or gloo host spans (CPU-only traces),
each placed in the step that issued it, sized from its recorded arguments, with the time no
compute ran beside it, and summarised against the measured GPU<->GPU ceiling. The
`exposed-communication` rule (`analysis.rules.communication`) and the rank merge
(`analysis.ranks`) both read them.

- **communication** = NCCL kernels (`Trace.gpu.collective`, from the kernels' names at load);
- **exposed** = a collective's kernel time minus the union of every other kernel on the same
  GPU (compute on other streams overlapping it);
- **bus bandwidth** of each collective = its bytes ÷ its kernel time × the nccl-tests factor
  (2(n−1)/n for all-reduce). Bytes come from the collective's recorded args (`In/Out msg
  nelems` × dtype size). A kernel's time includes waiting for late ranks, so one rank's
  figure is a lower bound; the merged multi-rank report uses the last-arriving rank's time.
  It is compared with the all-reduce bus bandwidth measured at the smallest message size at
  or above the collective's own (`Interconnect.allreduce_ceiling`).

A collective belongs to the step that **issued** it: its kernel's launch call (matched by
correlation id) lies in that step's host window. The GPU runs behind the host, so on a busy
rank the kernels of step N start inside step N+1's window (seen on 2xH200: a DDP rank's last
six all-reduces of a step ran in the next one); by issue the ranks agree on which collectives
a step holds. Kernels whose launch is not in the trace were issued before the capture began
(the profiler records the GPU activity still running when it starts: one or two all-reduces
of the previous step, with no args and no host record); they belong to no captured step.
Traces without launch records (none of their NCCL kernels has one) fall back to the kernel's
start time.

Sizes: torch 2.11 writes the collective's args (`Collective name`, `In msg nelems`, `dtype`,
`Process Group Name`, ... but no `Seq`) on the NCCL kernel itself, matched by start time;
older kinetos only on the host's `record_param_comms`, which is paired with the kernels of
the same kind in issue order (by launch time, not by the kernel's start: a lagging GPU starts
a kernel after later collectives' records were written).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from membound.analysis import intervals as iv
from membound.analysis.timeline import launch_times
from membound.device.interconnect import bus_factor
from membound.trace.distributed import read_comm_records
from membound.trace.model import COLLECTIVE_KINDS, HOST_COLLECTIVE, KERNEL, Trace


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
    issued_us: float | None = None  # its launch call's host time; None when not in the trace

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us


def collectives(trace: Trace, steps, records=None) -> list[Collective]:
    """The trace's collectives in time order: NCCL kernels on the main GPU, else (CPU-only
    traces) gloo host spans; each assigned to its step and sized from `records`
    (`membound.trace.distributed.read_comm_records`; read from the file when None)."""
    gpu, cpu = trace.gpu, trace.cpu
    out: list[Collective] = []
    if len(gpu) and (gpu.collective > 0).any():
        on = gpu.device == trace.main_device
        comm = on & (gpu.collective > 0)
        compute = on & (gpu.kind == KERNEL) & ~comm
        busy = iv.union(gpu.ts[compute], gpu.ts[compute] + gpu.dur[compute])
        idx = np.flatnonzero(comm)
        idx = idx[np.argsort(gpu.ts[idx], kind="stable")]
        issued = launch_times(trace.runtime, gpu.correlation[idx])
        for i, t in zip(idx, issued, strict=True):
            s, d = float(gpu.ts[i]), float(gpu.dur[i])
            span = (np.array([s]), np.array([s + d]))
            exposed = d - iv.total(iv.intersect(span, busy))
            kind = COLLECTIVE_KINDS[gpu.collective[i] - 1]
            c = Collective(kind, s, d, -1, True, max(exposed, 0.0))
            c.issued_us = None if np.isnan(t) else float(t)
            out.append(c)
    else:
        idx = np.flatnonzero(cpu.role == HOST_COLLECTIVE)
        idx = idx[np.argsort(cpu.ts[idx], kind="stable")]
        for i in idx:
            kind = COLLECTIVE_KINDS[cpu.collective[i] - 1]
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
        meta[_CACHE_KEY] = read_comm_records(trace.path) if trace.path else []
    return meta[_CACHE_KEY]


def _by_issue(cols: list[Collective]) -> bool:
    """Whether the collectives are placed by their launch time: some kernel's launch is in
    the trace (then the ones without were issued before the capture)."""
    return any(c.issued_us is not None for c in cols)


def _assign_steps(cols: list[Collective], steps) -> None:
    """The step that issued each collective (its launch in the step's host window), else
    (no launch records) the step its kernel starts in."""
    if not steps:
        return
    by_issue = _by_issue(cols)
    if by_issue:  # launch times are host times: the steps' host windows
        starts = np.array([_or(s.host_start_us, s.start_us) for s in steps])
        ends = np.array([_or(s.host_end_us, s.end_us) for s in steps])
    else:
        starts = np.array([s.start_us for s in steps])
        ends = np.array([s.end_us for s in steps])
    for c in cols:
        t = c.issued_us if by_issue else c.start_us
        if t is None:
            continue  # issued before the capture began
        j = int(np.searchsorted(starts, t, side="right")) - 1
        if j >= 0 and t < ends[j]:
            c.step = j


def _or(value, default):
    return default if value is None else value


def _attach_sizes(cols: list[Collective], records) -> None:
    """Sizes from the recorded args: a kernel's own args match it by start time; host records
    match the collectives of the same kind in issue order: with launch times, a kernel takes
    the latest record of its kind written before its launch (the record is written just
    before the launch, in the same thread); without, the oldest unpaired one before its start
    (NCCL runs one stream's collectives in the order they were issued). Kernels issued
    before the capture have no record here and get none."""
    on_kernel = {round(r.ts, 3): r for r in records if r.on_kernel}
    queues: dict[str, list] = {}
    host = sorted((r for r in records if not r.on_kernel), key=lambda r: r.ts)
    events = [(r.ts, 0, r) for r in host]
    by_issue = _by_issue(cols)
    if by_issue:
        events += [(c.issued_us, 1, c) for c in cols if c.issued_us is not None]
        for c in cols:
            rec = on_kernel.get(round(c.start_us, 3)) if c.issued_us is None else None
            if rec is not None:
                _size(c, rec)
    else:
        events += [(c.start_us, 1, c) for c in cols]
    events.sort(key=lambda e: (e[0], e[1]))
    for _, what, item in events:
        if what == 0:
            queues.setdefault(item.name, []).append(item)
            continue
        rec = on_kernel.get(round(item.start_us, 3))
        q = queues.get(item.kind)
        if rec is None and q:
            if by_issue:
                # the record just before this launch is its own; older unpaired ones belong
                # to collectives whose kernel the trace lacks and must not shift the rest
                rec = q[-1]
                q.clear()
            else:  # by kernel start: the GPU may run several collectives behind the host
                rec = q.pop(0)
        if rec is not None:
            _size(item, rec)


def _size(c: Collective, rec) -> None:
    c.bytes, c.group_size, c.dtype = rec.bytes, rec.group_size, rec.dtype
    c.seq, c.process_group = rec.seq, rec.process_group


def bus_bandwidth(c: Collective, ranks: int | None = None, dur_us: float | None = None):
    """nccl-tests bus bandwidth (bytes/s) of one collective, or None without its size."""
    n = ranks or c.group_size
    d = dur_us if dur_us is not None else c.dur_us
    if not c.bytes or not n or d <= 0:
        return None
    return c.bytes / (d * 1e-6) * bus_factor(c.kind, n)


def ceiling_fields(ceiling, nbytes: float | None, bw: float | None) -> dict:
    """`ceiling_gbs`, `ceiling_bytes` (the all-reduce size it was measured at) and
    `fraction_of_ceiling` for a collective of `nbytes` reaching `bw` bytes/s of bus bandwidth:
    the measured figure at the smallest size at or above `nbytes`."""
    peak, at = ceiling.allreduce_ceiling(nbytes) if ceiling is not None else (None, None)
    return {
        "ceiling_gbs": peak / 1e9 if peak else None,
        "ceiling_bytes": at,
        "fraction_of_ceiling": bw / peak if bw and peak else None,
    }


def summarize(cols: list[Collective], n_steps: int, ceiling=None) -> list[dict]:
    """Per collective kind: calls per step, bytes per call, kernel ms, bus bandwidth
    (median over calls) and its fraction of the all-reduce bus bandwidth measured at its
    size class (`ceiling_fields`)."""
    out = []
    for kind in sorted({c.kind for c in cols}):
        these = [c for c in cols if c.kind == kind]
        sizes = [c.bytes for c in these if c.bytes]
        bws = [b for b in (bus_bandwidth(c) for c in these) if b]
        bw = float(np.median(bws)) if bws else None
        nbytes = float(np.median(sizes)) if sizes else None
        row = {
            "collective": kind,
            "calls_per_step": len(these) / max(n_steps, 1),
            "bytes_per_call": nbytes,
            "median_ms": float(np.median([c.dur_us for c in these])) / 1e3,
            "exposed_ms_per_step": sum(c.exposed_us for c in these) / 1e3 / max(n_steps, 1),
            "bus_bandwidth_gbs": bw / 1e9 if bw else None,
            **ceiling_fields(ceiling, nbytes, bw),
        }
        out.append(row)
    return out
