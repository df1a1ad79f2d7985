"""Timeline: per step, wall time, GPU busy, kernel busy, idle — and why the GPU was idle.

Method (this is what the numbers mean):

- **Steps** are the host's `ProfilerStep#N` spans. Step i runs from its start to the start
  of step i+1 (the GPU work a step launches lags the host, so the window is contiguous);
  the last step ends at the later of its host end and the end of the GPU work launched
  inside it. Without step marks the whole window is one step (and a note says so).
- **Busy** is the union over every stream of kernels, memcpys and memsets inside the step;
  **kernel busy** the union of kernels alone; **idle** = wall − busy.
- **Gap causes.** First, a gap that ends with GPU work whose launch call had already
  returned when the gap began (a kernel of a CUDA-graph replay too: its graph launch had) is
  `queued`: the GPU had that work and idled only for its own turnaround between two pieces of
  queued work (about a microsecond between kernels on the H200), which no host-side change
  removes, whatever the host was doing meanwhile. The median of these gaps is the trace's
  `turnaround_us`.
  Every other idle instant is attributed to the first cause in this order whose host
  interval covers it (host intervals from every thread):
  `dataloader` — inside a DataLoader `__next__` span;
  `pageable_copy` — inside a runtime memcpy call whose copy came from pageable memory;
  `copy` — inside any other runtime memcpy call;
  `sync` — from the start of a synchronising call (`cudaStreamSynchronize`,
  `cudaDeviceSynchronize`, `cudaEventSynchronize`, `aten::item`, `aten::_local_scalar_dense`)
  until the GPU next starts work: after a sync the host has nothing queued, so the GPU
  waits for Python to issue the next op;
  `launch` — the host issuing GPU work no faster than the GPU runs it: inside a kernel-launch
  call, inside an op that launches kernels (the outermost CPU op on that thread enclosing a
  launch call: Python binding, dispatcher, autograd node, allocator — the per-op overhead
  CUDA graphs and torch.compile remove), in the Python glue between two such ops on one
  thread when shorter than `GLUE_US`, or any gap shorter than `LAUNCH_GAP_US` between
  GPU activities not queued. The profiler itself adds a few µs to every op and launch it records, so
  a profiled run shows more of this than an unprofiled one;
  `other` — everything else (Python work outside any op, CPU ops that launch nothing).
"""

from __future__ import annotations

import numpy as np

from membound.analysis import intervals as iv
from membound.analysis.clean import AMBIGUOUS
from membound.analysis.result import ATTRIBUTED_CAUSES, Step
from membound.trace.model import (
    COPY_OP,
    CPU_OP,
    D2H,
    DATALOADER_ROLES,
    GRAPH_LAUNCH,
    H2D,
    KERNEL,
    LAUNCH_CALLS,
    MEMCPY_CALL,
    PAGEABLE,
    STEP,
    SYNC,
    SYNC_OP,
    Trace,
)  # fmt: skip

#: a gap shorter than this between two GPU activities is launch overhead (µs)
LAUNCH_GAP_US = 20.0
#: the trace's turnaround is the median of its queued gaps once it has at least this many
MIN_QUEUED_GAPS = 20
#: host time outside any op, between two ops that launch kernels, shorter than this is the
#: Python glue of issuing work (µs); longer, it is the script's own work
GLUE_US = 100.0


def step_windows(trace: Trace) -> tuple[list[tuple[int, float, float, float, float]], bool]:
    """[(index, start_us, end_us, host_start_us, host_end_us)] and whether the trace had step
    marks. Windows are on the GPU's clock (`gpu_clock`); the host marks stay beside them."""
    cpu = trace.cpu
    idx = np.flatnonzero(cpu.role == STEP)
    if len(idx) == 0:
        starts = [a for a in (cpu.ts, trace.runtime.ts, trace.gpu.ts) if len(a)]
        ends = [
            a + d
            for a, d in (
                (cpu.ts, cpu.dur),
                (trace.runtime.ts, trace.runtime.dur),
                (trace.gpu.ts, trace.gpu.dur),
            )
            if len(a)
        ]
        if not starts:
            return [], False
        lo, hi = float(min(a.min() for a in starts)), float(max(a.max() for a in ends))
        return [(0, lo, hi, lo, hi)], False
    order = idx[np.lexsort((-cpu.dur[idx], cpu.ts[idx]))]
    # some torch versions record a step mark twice (cpu_op and user_annotation): keep one
    _, first = np.unique(cpu.name[order], return_index=True)
    order = order[np.sort(first)]
    host = cpu.ts[order].astype(np.float64)
    host_end = float(cpu.ts[order[-1]] + cpu.dur[order[-1]])
    starts, end = gpu_clock(trace, host, host_end)
    # the host window of the last step ends with its mark or the GPU work launched inside it
    host_end = max(host_end, _launched_until(trace, float(host[-1]), host_end))
    out = []
    for k, i in enumerate(order):
        number = int(cpu.step[i]) if cpu.step[i] >= 0 else k
        last = k + 1 == len(order)
        stop = end if last else float(starts[k + 1])
        out.append(
            (
                number,
                float(starts[k]),
                stop,
                float(host[k]),
                host_end if last else float(host[k + 1]),
            )
        )
    return out, True


def gpu_clock(trace: Trace, host_starts: np.ndarray, host_end: float) -> tuple[np.ndarray, float]:
    """Step boundaries on the GPU's clock, from the host's step marks.

    Step i starts when the host marks it, or, if the GPU is still running work launched
    before that mark, when that work ends: s_i = max(h_i, end of every GPU activity launched
    (by its runtime call) before h_i; activity the trace has no launch for was launched
    before the capture; one whose launch is ambiguous places no boundary). The last step ends with its host mark or with the GPU
    work launched up to then, whichever is later. A loop that syncs every step keeps its host
    windows; one whose host runs ahead (a GPU-bound loop that never syncs) gets steps as long
    as the GPU's step period instead of the host's enqueue time. Without launch records the
    host marks are the boundaries."""
    rt, gpu = trace.runtime, trace.gpu
    if not len(rt) or not len(gpu):
        return host_starts.copy(), host_end
    on = gpu.device == trace.main_device
    if not on.any():
        return host_starts.copy(), host_end
    # activity without its launch call in the trace was issued before the capture began (the
    # profiler records GPU work still running when it starts): launched before every mark;
    # activity whose correlation id names no single call (`analysis.clean`) places no mark
    corr = gpu.correlation[on]
    launched = launch_times(rt, corr)
    unmatched = np.isnan(launched)
    # ... but only the backlog a stream runs before the first work launched inside the
    # capture (streams run in order): later activity without a launch record (a trace that
    # lost its runtime calls) is unknown and places no boundary, or every step would start
    # at the end of all GPU work (0-ms steps)
    matched_ts = gpu.ts[on][~unmatched]
    first_matched = float(matched_ts.min()) if len(matched_ts) else -np.inf
    late = unmatched & (gpu.ts[on] > first_matched)
    t = np.nan_to_num(launched, nan=-np.inf)
    t[late] = np.inf
    t[corr == AMBIGUOUS] = np.inf
    t[_out_of_order(gpu.stream[on], gpu.ts[on], launched)] = np.inf
    ends = gpu.ts[on] + gpu.dur[on]
    order = np.argsort(t, kind="stable")
    t, busy_until = t[order], np.maximum.accumulate(ends[order])

    def until(times: np.ndarray, side: str) -> np.ndarray:
        """End of the GPU work launched before each time (-inf: none)."""
        j = np.searchsorted(t, times, side=side) - 1
        return np.where(j >= 0, busy_until[np.maximum(j, 0)], -np.inf)

    starts = np.maximum(host_starts, until(host_starts, "left"))
    starts = np.maximum.accumulate(starts)
    end = max(host_end, float(until(np.array([host_end]), "right")[0]), float(starts[-1]))
    return starts, end


def _graph_replays(trace: Trace) -> iv.Intervals:
    """Spans of the CUDA graph replays: from the first to the last GPU activity carrying one
    graph launch's correlation id (every kernel of a replay carries it)."""
    rt, gpu = trace.runtime, trace.gpu
    if not len(rt) or not len(gpu):
        return iv.EMPTY
    ids = rt.correlation[(rt.call == GRAPH_LAUNCH) & (rt.correlation >= 0)]
    sel = np.isin(gpu.correlation, ids)
    if not sel.any():
        return iv.EMPTY
    corr, ts, end = gpu.correlation[sel], gpu.ts[sel], gpu.ts[sel] + gpu.dur[sel]
    uniq, inv = np.unique(corr, return_inverse=True)
    lo = np.full(len(uniq), np.inf)
    hi = np.full(len(uniq), -np.inf)
    np.minimum.at(lo, inv, ts)
    np.maximum.at(hi, inv, end)
    return iv.union(lo, hi)


def _out_of_order(stream: np.ndarray, start: np.ndarray, launched: np.ndarray) -> np.ndarray:
    """Activities whose launch time cannot be right: a stream runs its work in launch order,
    so one that started after another on its stream was launched after it too. An activity
    recorded as launched before work that ran ahead of it on the same stream (a corrupt or
    foreign runtime timestamp) would otherwise move every step start to its end."""
    bad = np.zeros(len(start), dtype=bool)
    ok = np.isfinite(launched)
    if ok.sum() < 2:
        return bad
    idx = np.flatnonzero(ok)
    order = idx[np.lexsort((start[idx], stream[idx]))]
    s, t = stream[order], launched[order]
    firsts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    # the latest launch among the activities that ran before each one on its stream
    prior = np.full(len(t), -np.inf)
    for lo, hi in zip(firsts, np.r_[firsts[1:], len(t)], strict=True):  # per stream (few)
        if hi - lo > 1:
            prior[lo + 1 : hi] = np.maximum.accumulate(t[lo : hi - 1])
    bad[order] = t < prior - 1.0  # µs: clocks of one host agree far better than that
    return bad


def launch_times(rt, correlation: np.ndarray, end: bool = False) -> np.ndarray:
    """Host time of the runtime call that launched each GPU activity: when it began, or with
    `end` when it returned (NaN: not in the trace)."""
    call = iv.lookup(rt.correlation, correlation)
    hit = call[call >= 0]
    out = np.full(len(correlation), np.nan)
    out[call >= 0] = rt.ts[hit] + rt.dur[hit] if end else rt.ts[hit]
    return out


def _launched_until(trace: Trace, lo: float, hi: float) -> float:
    """End of the GPU work whose launch call happened in [lo, hi]."""
    rt, gpu = trace.runtime, trace.gpu
    if not len(rt) or not len(gpu):
        return hi
    inside = (rt.ts >= lo) & (rt.ts <= hi)
    corr = rt.correlation[inside]
    sel = np.isin(gpu.correlation, corr[corr >= 0])
    return float(np.max(gpu.ts[sel] + gpu.dur[sel])) if sel.any() else hi


class Timeline:
    """Busy/idle per step and the attributed idle intervals (global, for charts and spans)."""

    def __init__(self, trace: Trace, windows: list[tuple[int, float, float, float, float]]):
        self.trace = trace
        gpu = trace.gpu
        on = gpu.device == trace.main_device if len(gpu) else np.zeros(0, dtype=bool)
        self.busy = iv.union(gpu.ts[on], gpu.ts[on] + gpu.dur[on])
        k = on & (gpu.kind == KERNEL)
        self.kernel_busy = iv.union(gpu.ts[k], gpu.ts[k] + gpu.dur[k])
        self.windows = windows
        self.turnaround_us = 0.0  # set by `_steps` from the queued gaps
        self.host = self._host_causes()
        self.idle_by_cause: dict[str, iv.Intervals] = {c: iv.EMPTY for c in ATTRIBUTED_CAUSES}
        self.steps = self._steps()

    def _host_causes(self) -> dict[str, iv.Intervals]:
        t, cpu, rt, gpu = self.trace, self.trace.cpu, self.trace.runtime, self.trace.gpu
        out: dict[str, iv.Intervals] = {}
        dl = np.isin(cpu.role, DATALOADER_ROLES)
        out["dataloader"] = iv.union(cpu.ts[dl], cpu.ts[dl] + cpu.dur[dl])
        gstarts = np.sort(gpu.ts) if len(gpu) else np.zeros(0)

        def until_gpu_starts(ends: np.ndarray) -> np.ndarray:
            """Extend each end to the next start of GPU work (the GPU waits that long)."""
            if not len(gstarts) or not len(ends):
                return ends
            nxt = np.searchsorted(gstarts, ends, side="left")
            has = nxt < len(gstarts)
            return np.where(has, np.maximum(ends, gstarts[np.minimum(nxt, len(gstarts) - 1)]), ends)

        # a memcpy call is classified by the copy it issued; the host is "in the copy" for
        # the whole enclosing copy op (aten::copy_/to/_to_copy: its memcpy call and the
        # stream sync a blocking copy adds), and when the copy blocked the host (pageable
        # source, or a sync inside) until the GPU next starts work
        memcpy = rt.call == MEMCPY_CALL
        pageable_corr = gpu.correlation[(gpu.direction == H2D) & (gpu.host_memory == PAGEABLE)]
        pageable = memcpy & np.isin(rt.correlation, pageable_corr)
        d2h = memcpy & np.isin(rt.correlation, gpu.correlation[gpu.direction == D2H])
        other = memcpy & ~pageable & ~d2h
        spans = _copy_op_spans(t)
        s_rt = rt.call == SYNC
        sync_ts = rt.ts[s_rt]
        in_copy = np.zeros(len(sync_ts), dtype=bool)
        for cause, sel in (("pageable_copy", pageable), ("copy", other)):
            s, e, inner_sync = _enclosing(
                spans, rt.tid[sel], rt.ts[sel], rt.dur[sel], rt.tid[s_rt], sync_ts
            )
            in_copy |= inner_sync
            blocking = (
                np.ones(len(s), dtype=bool)
                if cause == "pageable_copy"
                else _contains_any(s, e, sync_ts)
            )
            e = np.where(blocking, until_gpu_starts(e), e)
            out[cause] = iv.union(s, e)
        # a sync covers from its start until the GPU next starts work; a device-to-host copy
        # (.cpu(), .item()) is a sync; a sync inside a host-to-device copy op is the copy's
        ds, de, _ = _enclosing(spans, rt.tid[d2h], rt.ts[d2h], rt.dur[d2h], rt.tid[s_rt], sync_ts)
        s_op = cpu.role == SYNC_OP
        keep = ~in_copy
        starts = np.concatenate([sync_ts[keep], cpu.ts[s_op], ds])
        ends = np.concatenate(
            [(rt.ts[s_rt] + rt.dur[s_rt])[keep], cpu.ts[s_op] + cpu.dur[s_op], de]
        )
        out["sync"] = iv.union(starts, until_gpu_starts(ends))
        launch = np.isin(rt.call, LAUNCH_CALLS)
        calls = iv.union(rt.ts[launch], rt.ts[launch] + rt.dur[launch])
        self.graph_replays = _graph_replays(t)
        self.launch_calls = calls
        self.issuing_ops = _issuing_op_spans(t, rt.tid[launch], rt.ts[launch], rt.dur[launch])
        out["launch"] = iv.union(
            np.concatenate([calls[0], self.issuing_ops[0]]),
            np.concatenate([calls[1], self.issuing_ops[1]]),
        )
        return out

    def _queued(self, gaps: iv.Intervals) -> np.ndarray:
        """Mask over `gaps`: the GPU activity that ends the gap was launched by a runtime call
        that had returned before the gap began (the GPU had the work queued). Activity with
        no launch call in the trace (launched before it began, or a trace without runtime
        calls) never makes a gap queued: nothing shows the host was done with it."""
        trace, gpu, rt = self.trace, self.trace.gpu, self.trace.runtime
        out = np.zeros(len(gaps[0]), dtype=bool)
        on = np.flatnonzero(gpu.device == trace.main_device) if len(gpu) else np.zeros(0, int)
        if not len(on) or not len(rt) or not len(out):
            return out
        order = on[np.argsort(gpu.ts[on], kind="stable")]
        nxt = np.searchsorted(gpu.ts[order], gaps[1], side="left")
        valid = nxt < len(order)
        # no launch call found (ambiguous ids are negative: none either): never queued
        returned = launch_times(rt, gpu.correlation[order], end=True)
        out[valid] = np.nan_to_num(returned, nan=np.inf)[nxt[valid]] <= gaps[0][valid]
        return out

    def _steps(self) -> list[Step]:
        """All steps at once: interval sets are cut at step boundaries, then summed per step
        (vectorised: a 1 GB trace has tens of thousands of steps)."""
        if not self.windows:
            return []
        starts = np.array([w[1] for w in self.windows])
        ends = np.array([w[2] for w in self.windows])
        windows = (starts, ends)
        lo, hi = float(starts[0]), float(ends[-1])
        n = len(self.windows)

        def per_step(intervals: iv.Intervals) -> np.ndarray:
            s, e = iv.intersect(intervals, windows)
            step = np.searchsorted(starts, s, side="right") - 1
            return np.bincount(step, weights=e - s, minlength=n)[:n] / 1e3

        idle_all = iv.gaps(self.busy, lo, hi)
        length = idle_all[1] - idle_all[0]
        interior = (idle_all[0] > lo) & (idle_all[1] < hi)
        queued_mask = interior & self._queued(idle_all)
        queued = (idle_all[0][queued_mask], idle_all[1][queued_mask])
        self.turnaround_us = (
            float(np.median(length[queued_mask])) if queued_mask.sum() >= MIN_QUEUED_GAPS else 0.0
        )
        # gaps strictly between two GPU activities, not queued, that are too short to be
        # anything but the host issuing work
        between = interior & ~queued_mask & (length < LAUNCH_GAP_US)
        short = (idle_all[0][between], idle_all[1][between])
        # inside a CUDA graph replay the GPU schedules the next node itself: no host launches
        # there, so its gaps are never launch overhead (nor any host cause: "other")
        replays = getattr(self, "graph_replays", iv.EMPTY)
        idle = iv.intersect(idle_all, windows)  # cut at step boundaries
        rest = idle
        by_cause: dict[str, np.ndarray] = {}
        for cause in ATTRIBUTED_CAUSES:
            if cause == "other":
                part = rest
            elif cause == "queued":
                part = iv.intersect(rest, queued)
                rest = iv.subtract(rest, part)
            else:
                host = self.host[cause]
                if cause == "launch":
                    host = iv.union(
                        np.concatenate([host[0], short[0]]), np.concatenate([host[1], short[1]])
                    )
                if len(replays[0]):
                    host = iv.subtract(host, replays)
                part = iv.intersect(rest, host)
                rest = iv.subtract(rest, part)
            self.idle_by_cause[cause] = part
            by_cause[cause] = per_step(part)
        busy = per_step(self.busy)
        kernel_busy = per_step(self.kernel_busy)
        idle_ms = per_step(idle)
        gpu = self.trace.gpu
        k = gpu.ts[gpu.kind == KERNEL]
        kstep = np.searchsorted(starts, k, side="right") - 1
        inside = (kstep >= 0) & (k < ends[np.maximum(kstep, 0)])
        kernels = np.bincount(kstep[inside], minlength=n)[:n]
        return [
            Step(
                index=w[0],
                start_us=w[1],
                end_us=w[2],
                wall_ms=(w[2] - w[1]) / 1e3,
                host_start_us=w[3],
                host_end_us=w[4],
                busy_ms=float(busy[i]),
                kernel_busy_ms=float(kernel_busy[i]),
                idle_ms=float(idle_ms[i]),
                idle_by_cause={c: float(v[i]) for c, v in by_cause.items()},
                kernels=int(kernels[i]),
            )
            for i, w in enumerate(self.windows)
        ]


def _issuing_op_spans(
    trace: Trace, tids: np.ndarray, ts: np.ndarray, dur: np.ndarray
) -> iv.Intervals:
    """Host spans of the outermost CPU ops (per thread) inside which a kernel was launched:
    the framework issuing GPU work (Python binding, dispatcher, autograd node, allocator,
    the launch call itself). CPU ops that launch nothing (work on CPU tensors) are left out.
    A trace of GPU activity alone (membound's timeline pass) has no CPU ops: there the
    launch calls themselves are the spans, bridged by the same short glue."""
    cpu = trace.cpu
    ops = cpu.kind == CPU_OP
    gpu_only = not ops.any()
    starts, ends = [], []
    for tid in iv.distinct(tids):
        m = ops & (cpu.tid == tid)
        if gpu_only:
            mine = tids == tid
            span = iv.union(ts[mine], ts[mine] + dur[mine])
        elif not m.any():
            continue
        else:
            span = iv.union(cpu.ts[m], cpu.ts[m] + cpu.dur[m])  # merged: the outermost ops
        t = ts[tids == tid]
        j = np.searchsorted(span[0], t, side="right") - 1
        ok = (j >= 0) & (t < span[1][np.maximum(j, 0)])
        used = iv.distinct(j[ok])
        s, e = span[0][used], span[1][used]
        # Python glue between two issuing ops (module __call__, argument handling) is part of
        # issuing the work when short; a longer pause is the script's own work ("other")
        glue = (s[1:] - e[:-1]) < GLUE_US
        starts.append(np.concatenate([s, e[:-1][glue]]))
        ends.append(np.concatenate([e, s[1:][glue]]))
    if not starts:
        return iv.EMPTY
    return iv.union(np.concatenate(starts), np.concatenate(ends))


def _copy_op_spans(trace: Trace) -> dict[int, iv.Intervals]:
    """Per thread, the outermost spans of copy ops (nested to → _to_copy → copy_ merged)."""
    cpu = trace.cpu
    sel = cpu.role == COPY_OP
    out = {}
    for tid in iv.distinct(cpu.tid[sel]):
        m = sel & (cpu.tid == tid)
        out[int(tid)] = iv.union(cpu.ts[m], cpu.ts[m] + cpu.dur[m])
    return out


def _enclosing(spans, tids, ts, dur, sync_tids, sync_ts):
    """For calls at (tid, ts, dur): the enclosing copy-op span (else the call itself), and
    which sync calls (by index) fall inside one of those spans."""
    s, e = ts.copy(), ts + dur
    inside = np.zeros(len(sync_ts), dtype=bool)
    for tid in iv.distinct(tids):
        span = spans.get(int(tid))
        if span is None:
            continue
        m = tids == tid
        j = np.searchsorted(span[0], ts[m], side="right") - 1
        ok = (j >= 0) & (span[1][np.maximum(j, 0)] >= ts[m] + dur[m])
        s[m] = np.where(ok, span[0][np.maximum(j, 0)], s[m])
        e[m] = np.where(ok, span[1][np.maximum(j, 0)], e[m])
        ju = iv.distinct(j[ok])
        used = (span[0][ju], span[1][ju])
        if len(used[0]):
            st = sync_tids == tid
            k = np.searchsorted(used[0], sync_ts[st], side="right") - 1
            hit = (k >= 0) & (sync_ts[st] < used[1][np.maximum(k, 0)])
            idx = np.flatnonzero(st)
            inside[idx[hit]] = True
    return s, e, inside


def _contains_any(s: np.ndarray, e: np.ndarray, points: np.ndarray) -> np.ndarray:
    pts = np.sort(points)
    return np.searchsorted(pts, s, side="left") < np.searchsorted(pts, e, side="left")
