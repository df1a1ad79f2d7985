"""membound.device.timing: the median timers (wall clock on CPU; CUDA events and CUDA-graph
replay on a GPU, marked)."""

from __future__ import annotations

import time

import pytest
import torch

from membound.device.timing import cuda_graph_median_ms, median_ms, wall_median_ms


def test_wall_median_ms_measures_a_sleep():
    ms = wall_median_ms(lambda: time.sleep(0.004), rep_ms=40)
    assert 3.5 <= ms <= 40


def test_median_ms_on_cpu_is_the_wall_clock():
    assert median_ms(lambda: time.sleep(0.002), "cpu", rep_ms=20) >= 1.5


@pytest.mark.gpu
def test_cuda_graph_median_ms_scales_with_bytes_and_drops_host_time():
    """GPU time only: a copy twice as large takes about twice as long, and host sleeps inside
    the function (not captured) add nothing."""
    src = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)

    def copy(n):
        return lambda: dst[:n].copy_(src[:n])

    full = cuda_graph_median_ms(copy(256 << 20))
    half = cuda_graph_median_ms(copy(128 << 20))
    assert 1.6 <= full / half <= 2.4
    slept = cuda_graph_median_ms(lambda: (time.sleep(0.001), dst.copy_(src)))
    assert slept < full * 1.5  # 1 ms of host sleep per call would dominate a ~0.1 ms copy


@pytest.mark.gpu
def test_cuda_burst_timed_is_device_time_without_launch_latency():
    """Bursts time the calls themselves: a copy twice as large takes about twice as long,
    and a small one is not inflated by the launch (the spin queued before hides it)."""
    from membound.device.timing import cuda_burst_timed

    src = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    full = cuda_burst_timed(lambda: dst.copy_(src), bursts=5, idle_ms=5).median_ms
    half = cuda_burst_timed(
        lambda: dst[: 256 << 20].copy_(src[: 256 << 20]), bursts=5, idle_ms=5
    ).median_ms
    assert 1.6 <= full / half <= 2.4
    tiny = cuda_burst_timed(lambda: dst[:4096].copy_(src[:4096]), bursts=5, idle_ms=5).median_ms
    assert tiny < 0.02  # ms: a 4 KiB copy; a launch's latency in it would be 5-20 us more


def test_kernel_burst_samples_split_each_burst_into_its_calls():
    """Each burst is its spin, then `calls` calls of k activities each; a call lasts from its
    first activity's start to its last one's end, and a burst's sample is its fastest call.
    Activity that does not split that way gives None, never a wrong figure."""
    from membound.device.timing import kernel_burst_samples

    ms = 1_000_000  # ns

    # 2 bursts x (spin + 3 calls x 2 kernels); call lengths 3, 2, 4 ms and 5, 6, 1.5 ms
    def burst(t0, lengths):
        spans, t = [(t0, t0 + ms)], t0 + ms
        for length in lengths:
            spans += [(t, t + ms // 2), (t + ms // 2, t + length)]
            t += length
        return spans

    spans = burst(0, [3 * ms, 2 * ms, 4 * ms]) + burst(100 * ms, [5 * ms, 6 * ms, 3 * ms // 2])
    assert kernel_burst_samples(spans, bursts=2, calls=3) == pytest.approx([2.0, 1.5])
    assert kernel_burst_samples(spans[:-1], bursts=2, calls=3) is None  # one missing
    assert kernel_burst_samples(spans[:6], bursts=1, calls=3) is None  # 5 after the spin
    assert kernel_burst_samples([], bursts=2, calls=3) is None
    # each call after one activity of `before` (a 10 ms read): only the call's own count
    lead = []
    t = 0
    for length in (3 * ms, 2 * ms):
        lead += [(t, t + 10 * ms), (t + 10 * ms, t + 10 * ms + length)]
        t += 20 * ms
    spans = [(-ms, 0)] + lead
    assert kernel_burst_samples(spans, bursts=1, calls=2, lead=1) == pytest.approx([2.0])
    # without `lead` the reads count as the calls' own work: 13 and 12 ms
    assert kernel_burst_samples(spans, bursts=1, calls=2) == pytest.approx([12.0])


@pytest.mark.gpu
def test_cuda_burst_clocks_reads_the_kernels_clock():
    """The same bursts timed by their kernels' durations: a copy twice as large takes about
    twice as long by that clock too, and no call is longer by its kernel than between its
    events (the events hold the kernel)."""
    from membound.device.timing import cuda_burst_clocks

    src = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    full = cuda_burst_clocks(lambda: torch.add(src, 1, out=dst), bursts=5, idle_ms=5)
    half = cuda_burst_clocks(
        lambda: torch.add(src[: 256 << 20], 1, out=dst[: 256 << 20]), bursts=5, idle_ms=5
    )
    assert full.kernels is not None and half.kernels is not None
    assert 1.6 <= full.kernels.median_ms / half.kernels.median_ms <= 2.4
    assert full.kernels.median_ms <= full.events.median_ms * 1.01
    # each call after a read that leaves L2 clean: the read is timed by neither clock
    flush = torch.zeros(64 << 20, device="cuda")
    clean = cuda_burst_clocks(
        lambda: torch.add(src, 1, out=dst), bursts=5, idle_ms=5, before=lambda: flush.sum()
    )
    assert clean.kernels is not None
    assert 0.8 <= clean.kernels.median_ms / full.kernels.median_ms <= 1.1
    assert 0.8 <= clean.events.median_ms / full.events.median_ms <= 1.1


def test_timed_keeps_the_spread_of_its_runs():
    """The 10th/90th percentile runs bracket the median; rates invert the order."""
    from membound.device.timing import Timed

    t = Timed.of([1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 10.0, 10.0])
    assert t.median_ms == 2.0 and t.runs == 11
    assert t.fast_ms == pytest.approx(2.0) and t.slow_ms == pytest.approx(10.0)
    rate, slow, fast = t.rates(1e6)
    assert rate == pytest.approx(5e8) and slow == pytest.approx(1e8) and fast == pytest.approx(5e8)
    one = Timed.of([3.0])
    assert (one.fast_ms, one.median_ms, one.slow_ms) == (3.0, 3.0, 3.0)
    with pytest.raises(ValueError):
        Timed.of([])


def test_wall_timed_spread_brackets_uneven_sleeps():
    from membound.device.timing import wall_timed

    naps = iter([0.0] + [0.001] * 16 + [0.008] * 4)  # the warm-up, then 20 timed runs
    t = wall_timed(lambda: time.sleep(next(naps)), rep_ms=1, min_reps=20, max_reps=20)
    assert t.runs == 20
    assert t.fast_ms <= t.median_ms <= t.slow_ms
    assert t.slow_ms >= 4 * t.median_ms  # the 8 ms naps are 20% of the runs
