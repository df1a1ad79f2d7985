"""Median timing of one callable: device events on CUDA, wall clock on CPU.

Medians, not means: one preempted run or one clock boost must not move a ceiling.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from membound._profiling import no_cycle_warning


@dataclass(frozen=True)
class Timed:
    """The median of repeated runs and the spread around it: the 10th and 90th percentile
    run times (`fast_ms` <= `median_ms` <= `slow_ms`), over `runs` runs."""

    median_ms: float
    fast_ms: float
    slow_ms: float
    runs: int

    @classmethod
    def of(cls, samples_ms: Sequence[float]) -> Timed:
        xs = sorted(float(x) for x in samples_ms)
        if not xs:
            raise ValueError("no samples")
        if len(xs) < 2:
            return cls(xs[0], xs[0], xs[0], len(xs))
        deciles = statistics.quantiles(xs, n=10, method="inclusive")
        return cls(statistics.median(xs), deciles[0], deciles[-1], len(xs))

    def rates(self, work: float) -> tuple[float, float, float]:
        """`work` per second at the (median, slow, fast) times: a figure and its spread."""
        return tuple(
            work / (max(ms, 1e-9) / 1e3) for ms in (self.median_ms, self.slow_ms, self.fast_ms)
        )


def cuda_median_ms(
    fn: Callable[[], object], *, warmup_ms: float = 25, rep_ms: float = 100
) -> float:
    """Median device milliseconds of `fn()` on the current CUDA stream.

    Uses `triton.testing.do_bench` when Triton imports (it also flushes L2 between runs);
    otherwise CUDA events around each run after a warm-up. Triton is imported here, lazily,
    never at `membound` import.
    """
    try:
        from triton.testing import do_bench
    except Exception:  # Triton is optional
        do_bench = None
    if do_bench is not None:
        return float(do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))
    return _cuda_events_ms(fn, warmup_ms=warmup_ms, rep_ms=rep_ms).median_ms


def cuda_timed(fn: Callable[[], object], *, warmup_ms: float = 25, rep_ms: float = 100) -> Timed:
    """`cuda_median_ms` with its spread: do_bench's 10/50/90th percentiles when Triton imports
    (its L2 flush included), else CUDA events around each run."""
    try:
        from triton.testing import do_bench
    except Exception:  # Triton is optional
        do_bench = None
    if do_bench is not None:
        fast, median, slow = do_bench(fn, warmup=warmup_ms, rep=rep_ms, quantiles=[0.1, 0.5, 0.9])
        n = max(1, int(rep_ms / max(float(median), 1e-3)))
        return Timed(float(median), float(fast), float(slow), n)
    return _cuda_events_ms(fn, warmup_ms=warmup_ms, rep_ms=rep_ms)


def _cuda_events_ms(fn: Callable[[], object], *, warmup_ms: float, rep_ms: float) -> Timed:
    import torch

    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(3):
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end) / 3, 1e-3)
    for _ in range(max(1, int(warmup_ms / estimate))):
        fn()
    n = max(3, int(rep_ms / estimate))
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(n)
    ]
    for s, e in events:
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return Timed.of([s.elapsed_time(e) for s, e in events])


def cuda_burst_timed(
    fn: Callable[[], object],
    *,
    bursts: int = 10,
    idle_ms: float = 20.0,
    calls: int = 3,
    queue_ms: float = 1.0,
) -> Timed:
    """Device milliseconds of `fn()` run in short bursts on a GPU that was idle before each:
    the clocks a training step's matmuls see, between memory-bound ops, rather than the
    power-capped ones of a long back-to-back run (H200, bf16 4096^3: 1980 MHz and 793 TFLOP/s
    in bursts, 1515 MHz and 685 sustained; `benchmarks/probe_matmul_roof.py`).

    Each burst: the host sleeps `idle_ms` with nothing queued, queues a spin of `queue_ms`
    on the GPU (`torch.cuda._sleep`, long enough for the host to queue every call behind it:
    with 0.05 ms a 4 KiB copy timed 39 us on the H200 host, the launches' latency) so that
    the calls start back to back, then `calls` calls, each between two events. The sample
    of a burst is its fastest call; the result is over the bursts' samples."""
    return cuda_burst_clocks(
        fn, bursts=bursts, idle_ms=idle_ms, calls=calls, queue_ms=queue_ms, kernel_clock=False
    ).events


@dataclass(frozen=True)
class BurstClocks:
    """One `cuda_burst_clocks` run read by two clocks: CUDA events around each call
    (`events`), and the GPU's own start and end of the kernels each call ran as the profiler
    records them (`kernels`, the clock every op of a trace is timed by; None when it was not
    read or the kernels could not be told apart per call)."""

    events: Timed
    kernels: Timed | None


def cuda_burst_clocks(
    fn: Callable[[], object],
    *,
    bursts: int = 10,
    idle_ms: float = 20.0,
    calls: int = 3,
    queue_ms: float = 1.0,
    kernel_clock: bool = True,
    before: Callable[[], object] | None = None,
) -> BurstClocks:
    """`cuda_burst_timed`'s bursts, run under a profiler that records GPU activity only when
    `kernel_clock`, so the same calls are also timed by their kernels' own durations: what
    a trace's ops are timed by. An event pair around a call holds more than its kernels (the
    GPU's handling of the launch and of the events), so a roof timed by events alone sits
    below what the same kernel shows in a trace by that much.

    `before`, when given, runs ahead of every call, untimed by either clock (its events
    around `fn` alone, its kernels left out of the call's): what the GPU should hold when
    the call starts (`device.measure.clean_l2`)."""
    import torch

    if before is not None:
        before()
    fn()
    torch.cuda.synchronize()
    lead = 0
    if before is not None and kernel_clock:  # the activities `before` adds to each call
        prof = _gpu_profiler()
        if prof is not None:
            with no_cycle_warning(), prof:
                before()
                torch.cuda.synchronize()
            lead = len(_gpu_spans(prof))
    cycles = int(queue_ms * 1e-3 * _sm_mhz() * 1e6)
    samples = []
    prof = _gpu_profiler() if kernel_clock else None
    with no_cycle_warning(), prof if prof is not None else _nothing():
        for _ in range(bursts):
            torch.cuda.synchronize()
            time.sleep(idle_ms / 1e3)
            torch.cuda._sleep(cycles)
            if before is None:  # the calls back to back, an event between each two
                ev = [torch.cuda.Event(enable_timing=True) for _ in range(calls + 1)]
                ev[0].record()
                for e in ev[1:]:
                    fn()
                    e.record()
                pairs = list(zip(ev, ev[1:], strict=False))
            else:
                pairs = []
                for _ in range(calls):
                    before()
                    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
                    start.record()
                    fn()
                    end.record()
                    pairs.append((start, end))
            pairs[-1][1].synchronize()
            samples.append(min(a.elapsed_time(b) for a, b in pairs))
        torch.cuda.synchronize()
    kernels = None
    if prof is not None:
        per_burst = kernel_burst_samples(_gpu_spans(prof), bursts=bursts, calls=calls, lead=lead)
        kernels = Timed.of(per_burst) if per_burst else None
    return BurstClocks(Timed.of(samples), kernels)


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _gpu_profiler():
    """A profiler of GPU activity alone (kernels, copies, memsets), or None without one."""
    try:
        from torch.profiler import ProfilerActivity, profile

        return profile(activities=[ProfilerActivity.CUDA])
    except Exception:  # noqa: BLE001 - no profiler in this build
        return None


def _gpu_spans(prof) -> list[tuple[int, int]]:
    """(start ns, end ns) of every GPU activity `prof` recorded, by start."""
    try:
        events = prof.profiler.kineto_results.events()
    except Exception:  # noqa: BLE001 - a profiler without kineto results
        return []
    spans = []
    for e in events:
        try:
            if str(e.device_type()).rsplit(".", 1)[-1] != "CUDA":
                continue
            start = int(e.start_ns())
            spans.append((start, start + int(e.duration_ns())))
        except Exception:  # noqa: BLE001 - an event without device times
            continue
    return sorted(spans)


def kernel_burst_samples(
    spans: Sequence[tuple[int, int]], *, bursts: int, calls: int, lead: int = 0
) -> list[float] | None:
    """Per burst, the fastest call's device milliseconds by its kernels' clock, from the GPU
    activity of `cuda_burst_clocks` (`spans`: (start, end) ns by start). Each burst recorded
    its spin and then `calls` calls of the same work, each after `lead` activities of the
    `before` that ran ahead of it, so it holds 1 + calls x (lead + k) activities: a call is
    its last k, from the first's start to the last's end. None when the activity does not
    split that way (a call whose work varies, activity missing)."""
    if bursts < 1 or calls < 1 or lead < 0 or len(spans) % bursts:
        return None
    per = len(spans) // bursts
    if per < 1 + calls * (lead + 1) or (per - 1) % calls:
        return None
    k = (per - 1) // calls - lead
    out = []
    for b in range(bursts):
        burst = spans[b * per + 1 : (b + 1) * per]  # the spin first
        times = []
        for i in range(calls):
            call = burst[i * (lead + k) + lead : (i + 1) * (lead + k)]
            times.append((call[-1][1] - call[0][0]) / 1e6)
        if min(times) <= 0:
            return None
        out.append(min(times))
    return out


def _sm_mhz() -> float:
    """The SM clock torch reads through NVML (MHz), or a nominal 1500 without NVML: enough
    to size a spin."""
    import torch

    try:
        return max(float(torch.cuda.clock_rate()), 1.0)
    except Exception:  # noqa: BLE001 - no NVML
        return 1_500.0


def _warm_up_for_capture(fns: Sequence[Callable[[], object]]) -> None:
    """Run each fn 3 times on a side stream (CUDA-graph capture wants its first calls, and
    their allocations, off the default stream), then wait for them."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for fn in fns:
            for _ in range(3):
                fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()


def _replayer() -> Callable[[object], float]:
    """A function replaying one CUDA graph and returning its device milliseconds."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def replay_ms(graph) -> float:
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    return replay_ms


def cuda_graph_median_ms(
    fn: Callable[[], object], *, reps: int = 20, samples: int = 7, flush_bytes: int = 256 << 20
) -> float:
    """Median device milliseconds of `fn()` with the host taken out: GPU time only.

    `fn` is captured `reps` times into one CUDA graph, each call after an L2 flush (a memset
    of `flush_bytes`, as do_bench does); a second graph holds the flushes alone. Each sample
    replays both and takes the difference / reps. What a call costs when the host keeps ahead
    of the GPU (a training step with work queued), whatever the host's launch overhead.
    Raises whatever capture raises when `fn` is not capturable (syncs, CPU work on results).
    """
    import torch

    _warm_up_for_capture([fn])
    flush = torch.empty(flush_bytes, dtype=torch.int8, device="cuda")
    with_fn, flush_only = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(with_fn):
        for _ in range(reps):
            flush.zero_()
            fn()
    with torch.cuda.graph(flush_only):
        for _ in range(reps):
            flush.zero_()
    replay_ms = _replayer()
    replay_ms(with_fn)
    replay_ms(flush_only)
    diffs = [(replay_ms(with_fn) - replay_ms(flush_only)) / reps for _ in range(samples)]
    del with_fn, flush_only
    return max(statistics.median(diffs), 0.0)


def cuda_graph_replays_ms(
    fns: Sequence[Callable[[], object]], *, reps: int = 100, samples: int = 15
) -> list[list[float]]:
    """Per `fn` of `fns`, `samples` device times (ms per call) of a CUDA graph holding `reps`
    back-to-back calls of it: no host between the launches and no L2 flush, so data that
    fits in L2 stays there from one call to the next (what `cuda_timed`'s flush prevents).

    The graphs replay interleaved (fns[0], fns[1], ..., fns[0], ...), so a clock change
    moves every fn's samples alike and differences between them keep their meaning. Each
    call still pays its kernel's fixed cost (launch, ramp-up, tail): take differences of
    two sizes to remove it (`device.measure._l2`).
    """
    import torch

    _warm_up_for_capture(fns)
    graphs = []
    for fn in fns:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(reps):
                fn()
        graphs.append(g)
    replay_ms = _replayer()
    for g in graphs:  # the first replay uploads the graph
        replay_ms(g)
    out: list[list[float]] = [[] for _ in graphs]
    for _ in range(samples):
        for times, g in zip(out, graphs, strict=True):
            times.append(replay_ms(g) / reps)
    del graphs
    return out


def wall_median_ms(
    fn: Callable[[], object], *, rep_ms: float = 200, min_reps: int = 3, max_reps: int = 50
) -> float:
    """Median wall-clock milliseconds of `fn()` after one warm-up run (CPU work)."""
    return wall_timed(fn, rep_ms=rep_ms, min_reps=min_reps, max_reps=max_reps).median_ms


def wall_timed(
    fn: Callable[[], object], *, rep_ms: float = 200, min_reps: int = 3, max_reps: int = 50
) -> Timed:
    """Wall-clock runs of `fn()` after one warm-up run, for `rep_ms` (at least `min_reps`,
    at most `max_reps` runs): their median and spread."""
    fn()
    times: list[float] = []
    deadline = time.perf_counter() + rep_ms / 1e3
    while len(times) < min_reps or (time.perf_counter() < deadline and len(times) < max_reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return Timed.of(times)


def median_ms(fn: Callable[[], object], device: str, *, rep_ms: float, max_reps: int = 50) -> float:
    """`cuda_median_ms` on "cuda", `wall_median_ms` elsewhere: one call for either device."""
    if device == "cuda":
        return cuda_median_ms(fn, rep_ms=rep_ms)
    return wall_median_ms(fn, rep_ms=rep_ms, max_reps=max_reps)


def timed(
    fn: Callable[[], object],
    device: str,
    *,
    rep_ms: float,
    max_reps: int = 50,
    warmup_ms: float = 25,
) -> Timed:
    """`median_ms` with the spread of its runs: `cuda_timed` on "cuda" (after `warmup_ms` of
    untimed runs), `wall_timed` elsewhere (after one)."""
    if device == "cuda":
        return cuda_timed(fn, rep_ms=rep_ms, warmup_ms=warmup_ms)
    return wall_timed(fn, rep_ms=rep_ms, max_reps=max_reps)
