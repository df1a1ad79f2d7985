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
