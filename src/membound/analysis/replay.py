"""Replaying a recorded timeline with changes: what the step would take without its syncs.

A finding's `ms/step` is a prediction of what its fix saves on the step as the user runs it.
For idle the GPU spends waiting on the host, the idle a cause leaves in the trace is not that
saving: removing a `.item()` also removes the refill after it (the GPU starved while the host
issues the first ops of the next step faster than they run), and the profiler's own cost on
every API call makes the host look slower than it is. `Replay` rebuilds the step from what
the timeline pass recorded and plays it again with the host's and the GPU's rules:

- **Host.** The runtime/driver calls of the threads that launch GPU work, merged in time
  order, each with the host work before it (the gap since the previous call ended) and its
  own duration. A synchronising call (`cudaStreamSynchronize`, `cudaDeviceSynchronize`,
  `cudaEventSynchronize`) waits until every stream has run what was launched before it, then
  takes its own time (its duration minus the wait it recorded); a memcpy call that returned
  only after its copy ended (a blocking copy) waits for its copy, unless it is an async copy
  that never blocks the host (device to device, or from pinned host memory: such a call
  returned after its copy only because the GPU was idle when it was made).
- **GPU.** Each stream runs its activities in launch order: an activity starts at the later
  of its launch plus the trace's launch latency and the end of the stream's previous one,
  and lasts what it lasted. Dependencies between streams (events) are not modelled.
- **Calibration.** The capture adds host time to every API call it records. The replay
  takes `c` µs off each call's host work (its own time first, then the gap before it) and
  finds the `c` at which the replayed step equals the step membound timed without the
  profiler (`StepTiming.unprofiled_median_ms`); `c` is the profiler's cost per call.

`Replay.step_ms(drop_syncs=True)` against `Replay.step_ms()` is then what removing the
loop's host syncs saves (the `host-sync` finding's `time_lost_ms_per_step`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from membound.analysis import intervals as iv
from membound.trace.model import D2D, D2H, H2D, KERNEL, LAUNCH_CALLS, MEMCPY_CALL, PINNED, SYNC

#: a blocking D2H copy up to this size is a host sync's (`.item()`, `.cpu()` of a scalar or
#: a small tensor), removed with the sync when `drop_syncs`; larger ones are data the loop
#: uses and stay (bytes)
SMALL_COPY = 1 << 16
#: the replayed step must match the unprofiled one to within this share to be used
CALIBRATION_TOLERANCE = 0.02
#: the replay of the recorded calls must give the recorded step to within this share to be
#: trusted (`Replay.faithful`)
MODEL_TOLERANCE = 0.05
#: at most this many runtime calls are replayed (the first steps that hold them): a replay
#: is a Python loop over calls, played ~20 times to calibrate
MAX_CALLS = 200_000


def kernel_label(name: str) -> str:
    """A kernel's name short enough to print: its function without namespaces and template
    arguments, with the innermost functor it runs where the name has one
    ("multi_tensor_apply_kernel (FusedAdamMathFunctor)")."""
    base = re.sub(r"^void\s+", "", name).replace("(anonymous namespace)::", "")
    head = re.split(r"[<(]", base, maxsplit=1)[0].split("::")[-1].strip() or base[:60]
    functors = re.findall(r"(\w+Functor)\b", base)  # the innermost is what it computes
    return f"{head} ({functors[-1]})" if functors and functors[-1] != head else head


@dataclass
class Replay:
    """A recorded window of steps, ready to be played again (`from_trace`)."""

    steps: int
    begin: float  # µs: the host's first step mark
    tail: float  # µs of host work after the last call, to the last step's host end
    gap: np.ndarray  # per call: host work before it (µs)
    own: np.ndarray  # per call: its own host time (µs; a sync's without its wait)
    wait: np.ndarray  # per call: 0 none, 1 waits for every stream, 2 waits for its own copy
    sync_copy: np.ndarray  # per call: a small blocking D2H copy (a host sync's)
    act_start: np.ndarray  # per call: index of its first activity in `act_*` (CSR)
    act_stream: np.ndarray  # per activity: stream slot (0..n_streams-1)
    act_dur: np.ndarray  # per activity: µs
    act_row: np.ndarray  # per activity: its row of `trace.gpu`
    act_kernel: np.ndarray  # per activity: a kernel (not a copy or memset)
    free0: np.ndarray  # per stream slot: when it finishes the work launched before `begin`
    latency: float  # µs from a launch call to the start of its work on an idle stream
    profiled_ms: float  # the recorded step (`Step.wall_ms` mean) the replay should give at c=0
    before: int = -1  # row of `trace.gpu`: the last kernel launched before the window (-1 none)
    cost_per_call: float = 0.0  # µs: the calibrated profiler cost per call

    @classmethod
    def from_trace(cls, trace, steps) -> Replay | None:
        """The replay of `steps` (`analysis.result.Step`s with host marks) of `trace`'s main
        device; None when the trace has no runtime calls or launches to replay."""
        rt, gpu = trace.runtime, trace.gpu
        if not steps or not len(rt) or not len(gpu):
            return None
        if len(steps) > 2:  # keep the first steps whose calls fit in MAX_CALLS
            marks = np.array([s.host_end_us or np.nan for s in steps], dtype=np.float64)
            if np.isnan(marks).any():
                return None
            upto = np.searchsorted(np.sort(rt.ts), marks)
            n = int(np.searchsorted(upto - upto[0], MAX_CALLS, side="right"))
            steps = steps[: max(n, 2)]
        lo = steps[0].host_start_us
        hi = steps[-1].host_end_us
        if lo is None or hi is None or not hi > lo:
            return None
        launches = np.isin(rt.call, LAUNCH_CALLS)
        if not launches.any():
            return None
        tids, counts = np.unique(rt.tid[launches], return_counts=True)
        hosts = tids[counts >= 0.01 * counts.sum()]  # threads that launch GPU work
        sel = np.flatnonzero(np.isin(rt.tid, hosts) & (rt.ts >= lo) & (rt.ts < hi))
        if not len(sel):
            return None
        sel = sel[np.argsort(rt.ts[sel], kind="stable")]
        ts, dur = rt.ts[sel].astype(np.float64), rt.dur[sel].astype(np.float64)
        ends = np.maximum.accumulate(ts + dur)
        gap = np.maximum(ts - np.r_[lo, ends[:-1]], 0.0)
        corr, call = rt.correlation[sel], rt.call[sel]

        on = np.flatnonzero(gpu.device == trace.main_device)
        launched_by = iv.lookup(corr, gpu.correlation[on])
        a_idx = on[launched_by >= 0]  # activities launched by a replayed call
        a_call = launched_by[launched_by >= 0]
        a_order = np.lexsort((gpu.ts[a_idx], a_call))
        a_idx, a_call = a_idx[a_order], a_call[a_order]
        streams, a_stream = np.unique(gpu.stream[a_idx], return_inverse=True)
        a_ts, a_dur = gpu.ts[a_idx].astype(np.float64), gpu.dur[a_idx].astype(np.float64)
        act_start = np.searchsorted(a_call, np.arange(len(sel) + 1))

        # what each stream still ran at `lo`: work launched before the window, started
        # before the stream's first replayed activity and not ended by `lo`
        free0 = np.full(len(streams), float(lo))
        others = on[~np.isin(on, a_idx)]
        o_end = gpu.ts[others] + gpu.dur[others]
        for k, s in enumerate(streams.tolist()):
            first_ts = a_ts[a_stream == k].min()
            m = (gpu.stream[others] == s) & (gpu.ts[others] < first_ts) & (o_end > lo)
            if m.any():
                free0[k] = float(o_end[m].max())

        # per call, when the work it launched ended (as recorded); the GPU's done-time at
        # each call: a sync's own time is its duration less the wait for that
        a_end = a_ts + a_dur
        last_end = np.full(len(sel), -np.inf)
        if len(a_call):
            np.maximum.at(last_end, a_call, a_end)
        done_before = np.maximum.accumulate(np.r_[free0.max(), last_end[:-1]])
        wait = np.zeros(len(sel), dtype=np.int8)
        own = dur.copy()
        is_sync = call == SYNC
        wait[is_sync] = 1
        recorded_wait = np.clip(done_before - ts, 0.0, None)
        own[is_sync] = np.maximum(dur[is_sync] - recorded_wait[is_sync], 0.0)
        # a memcpy call that returned after its copy ended blocked on it, unless it is an
        # async copy that never blocks the host (device to device, or from pinned memory):
        # such a call returns after its copy only where the GPU was idle when it was made,
        # and taken as blocking it would hold the host back for the whole queue in a play
        # where the host runs ahead (a ModelEmaV2 update's 182 `copy_` a step, H100 ConvNeXt)
        first = act_start[:-1]
        has = act_start[1:] > first
        copy_call = (call == MEMCPY_CALL) & has
        blocking = copy_call & (ts + dur >= last_end - 1.0)
        if blocking.any():
            k = np.flatnonzero(blocking)
            row = a_idx[first[k]]
            asynchronous = np.array(
                ["Async" in trace.names[int(n)] for n in rt.name[sel[k]]], dtype=bool
            )
            never = (gpu.direction[row] == D2D) | (
                (gpu.direction[row] == H2D) & (gpu.host_memory[row] == PINNED)
            )
            blocking[k[asynchronous & never]] = False
        wait[blocking] = 2
        waited = np.clip(np.minimum(last_end, ts + dur) - ts, 0.0, None)
        own[blocking] = np.maximum(dur[blocking] - waited[blocking], 0.0)
        small = np.zeros(len(sel), dtype=bool)
        if len(a_idx):
            k = first[blocking]
            small[blocking] = (gpu.direction[a_idx[k]] == D2H) & (gpu.bytes[a_idx[k]] <= SMALL_COPY)

        # launch latency: launch call to start, for activities that found their stream idle
        prev_end = np.full(len(a_idx), -np.inf)
        for k in range(len(streams)):
            m = np.flatnonzero(a_stream == k)
            if len(m) > 1:
                prev_end[m[1:]] = np.maximum.accumulate(a_end[m[:-1]])
        launch_ts = ts[a_call] if len(a_call) else np.zeros(0)
        idle = prev_end < launch_ts
        lat = a_ts[idle] - launch_ts[idle]
        lat = lat[lat >= 0]
        latency = float(np.median(lat)) if len(lat) else 0.0

        # the kernel a sync at the window's start waits for was launched before it
        k_prior = others[(gpu.kind[others] == KERNEL) & (gpu.ts[others] < lo)]
        before = int(k_prior[np.argmax(gpu.ts[k_prior])]) if len(k_prior) else -1

        tail = max(hi - float(ends[-1]), 0.0)
        profiled = float(np.mean([s.wall_ms for s in steps]))
        return cls(
            steps=len(steps), begin=float(lo), tail=tail, gap=gap, own=own, wait=wait,
            sync_copy=small, act_start=act_start, act_stream=a_stream.astype(np.int64),
            act_dur=a_dur, act_row=a_idx, act_kernel=gpu.kind[a_idx] == KERNEL, before=before, free0=free0, latency=latency, profiled_ms=profiled,
        )  # fmt: skip

    def streams_busy(self, share: float = 0.01) -> int:
        """Streams holding at least `share` of the replayed activity time: above one, work
        on one stream may wait for another's by events, which the replay does not model."""
        if not len(self.act_dur):
            return 0
        per = np.bincount(self.act_stream, weights=self.act_dur)
        return int((per >= share * per.sum()).sum())

    def sync_sites(self, trace) -> dict[str, np.ndarray]:
        """The loop's sync sites, each named by the last kernel launched before it (`kernel_label`
        of the op whose result the host waits for), as masks over the calls for
        `step_ms(drop_syncs=)`."""
        gpu = trace.gpu
        # per call: the last kernel among the activities launched up to it (-1: none)
        kernels = np.flatnonzero(gpu.kind[self.act_row] == KERNEL)
        j = np.searchsorted(kernels, self.act_start[1:]) - 1
        last = (
            np.where(j >= 0, kernels[np.maximum(j, 0)], -1) if len(kernels) else np.full(len(j), -1)
        )
        sites: dict[str, np.ndarray] = {}
        for i in np.flatnonzero((self.wait == 1) | self.sync_copy).tolist():
            row = int(self.act_row[last[i]]) if last[i] >= 0 else self.before
            name = (
                kernel_label(trace.names[int(gpu.name[row])])
                if row >= 0
                else "work launched before the trace"
            )
            mask = sites.setdefault(name, np.zeros(len(self.gap), dtype=bool))
            mask[i] = True
        return sites

    # ------------------------------------------------------------------------------ play
    def host_work(self, cost_per_call: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(per call: its own host time, the host work before it), µs, with `cost_per_call`
        µs of the profiler's cost taken off each call (default: the calibrated one), its own
        time first, then the gap before it."""
        c = self.cost_per_call if cost_per_call is None else float(cost_per_call)
        own = np.maximum(self.own - c, 0.0)
        gap = np.maximum(self.gap - np.maximum(c - self.own, 0.0), 0.0)
        return own, gap

    def step_ms(
        self,
        cost_per_call: float | None = None,
        *,
        drop_syncs: bool | np.ndarray = False,
        kernel_scale: float = 1.0,
        host_scale: np.ndarray | None = None,
        act_scale: np.ndarray | None = None,
    ) -> float:
        """The replayed step (ms): host work less `cost_per_call` µs per call (default: the
        calibrated one); `drop_syncs` removes every sync's wait and own time, and the waits of
        small blocking D2H copies (`SMALL_COPY`: what `.item()` copies); a boolean array over
        the calls drops only the syncs and copies it marks. `kernel_scale` multiplies every
        kernel's duration (copies and memsets keep theirs): the step with faster GPU work.
        `host_scale` (per call) multiplies each call's host work (the gap before it and its own
        time, the profiler's cost taken off first), `act_scale` (per activity) each activity's
        duration: a change that touches some calls and kernels only (`analysis.compile_whatif`)."""
        own, gap = self.host_work(cost_per_call)
        if host_scale is not None:
            own, gap = own * host_scale, gap * host_scale
        wait = self.wait.copy()
        if drop_syncs is not False:
            mark = np.ones(len(wait), dtype=bool) if drop_syncs is True else drop_syncs
            syncs = (wait == 1) & mark
            own[syncs] = 0.0
            wait[syncs] = 0
            wait[self.sync_copy & mark] = 0
        free = self.free0.astype(np.float64).tolist()
        durations = self.act_dur
        if kernel_scale != 1.0:
            durations = np.where(self.act_kernel, durations * max(kernel_scale, 0.0), durations)
        if act_scale is not None:
            durations = durations * np.maximum(act_scale, 0.0)
        start, stream, adur = (
            self.act_start.tolist(),
            self.act_stream.tolist(),
            durations.tolist(),
        )
        lat = self.latency
        h = self.begin
        waited = 0.0
        g, o, w = gap.tolist(), own.tolist(), wait.tolist()
        for i in range(len(g)):
            h += g[i]
            wi = w[i]
            if wi == 1:
                ready = max(free)
                if ready > h:
                    waited += ready - h
                    h = ready
            end = h
            for a in range(start[i], start[i + 1]):
                s = stream[a]
                f = free[s]
                t0 = h + lat if h + lat > f else f
                end = free[s] = t0 + adur[a]
            if wi == 2 and end > h:
                waited += end - h
                h = end
            h += o[i]
        h += self.tail
        #: the host's time waiting in syncs and blocking copies in this play (ms a step)
        self.waited_ms = waited / self.steps / 1e3
        # the first step starts on the GPU's clock (`timeline.gpu_clock`): once the work
        # launched before its host mark is done
        begin = max(self.begin, float(self.free0.max()))
        return (max(h, max(free)) - begin) / self.steps / 1e3

    @cached_property
    def as_profiled_ms(self) -> float:
        """The replayed step with the profiler's cost kept (`step_ms(0.0)`), played once: what
        `faithful` checks, and where `calibrate` starts."""
        return self.step_ms(0.0)

    def faithful(self) -> bool:
        """Whether the replay, with the profiler's cost kept, gives the recorded step (within
        `MODEL_TOLERANCE`): what the model leaves out (dependencies between streams, work of
        threads it does not replay) did not shape this loop."""
        return abs(self.as_profiled_ms - self.profiled_ms) <= MODEL_TOLERANCE * self.profiled_ms

    def calibrate(self, unprofiled_ms: float, hidden_us: float = 0.0) -> bool:
        """Set `cost_per_call` so that the replayed step is `unprofiled_ms`; False (and 0)
        when no cost per call gets within `CALIBRATION_TOLERANCE` of it. A replay already at
        or below it with the profiler's cost kept takes none off (True, 0): the profiler
        cost no step time there; or, with `hidden_us` (the profiler's cost per call measured
        on this machine, `trace.profiler_cost`), takes that off: the GPU set the pace and hid
        the host's cost, which a replay of faster GPU work would expose."""
        lo, hi = 0.0, float(np.quantile(self.own + self.gap, 0.9)) if len(self.own) else 0.0
        if self.as_profiled_ms <= unprofiled_ms * (1 + CALIBRATION_TOLERANCE):
            self.cost_per_call = max(float(hidden_us or 0.0), 0.0)
            return True
        if self.step_ms(hi) > unprofiled_ms:
            self.cost_per_call = 0.0
            return False
        _, self.cost_per_call = self._bisect(lo, hi, lambda step: step > unprofiled_ms)
        return True

    def _bisect(self, lo: float, hi: float, keeps) -> tuple[float, float]:
        """(lo, hi) narrowed to 0.01 µs (at most 30 halvings) around the cost per call where
        `keeps(step_ms(cost))` stops holding: it holds at `lo` and not at `hi`, the replayed
        step falling as the cost per call grows."""
        for _ in range(30):
            mid = (lo + hi) / 2
            if keeps(self.step_ms(mid)):
                lo = mid
            else:
                hi = mid
            if hi - lo < 0.01:
                break
        return lo, hi

    def raise_cost(self, cost_per_call: float, unprofiled_ms: float) -> bool:
        """After `calibrate`: take `cost_per_call` µs off each call where that is more than the
        calibration took, as far as the replayed step stays within `CALIBRATION_TOLERANCE` of
        `unprofiled_ms` (below the calibrated replay's own step where that is lower: the
        calibration accepted it), the largest cost that does if `cost_per_call` itself does
        not; True where the cost rose. Where the GPU paced the profiled step, every cost from the
        calibrated one up gives the unprofiled step, and the calibration keeps the least: the
        host the trace recorded, slowed by the capture. A cost measured apart from the step
        (`StepTiming.profiler_host_ms`, with sleeping syncs) picks the right one among them."""
        current = self.cost_per_call
        if not cost_per_call > current:
            return False
        # the calibration accepted the replayed step as the unprofiled one: neither may it
        # fall more than the tolerance below the lower of the two
        floor = min(unprofiled_ms, self.step_ms(current)) * (1 - CALIBRATION_TOLERANCE)
        if self.step_ms(cost_per_call) >= floor:
            self.cost_per_call = float(cost_per_call)
            return True
        lo, _ = self._bisect(current, float(cost_per_call), lambda step: step >= floor)
        if lo <= current:
            return False
        self.cost_per_call = lo
        return True
