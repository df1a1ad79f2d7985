"""benchmarks/probe_turnaround.py: the traced gap and the implied turnaround (CPU)."""

from __future__ import annotations

import numpy as np
import pytest

from support.paths import benchmark


def test_traced_stats_reads_durations_and_gaps_in_start_order():
    """Kernels of 3 us each, 1.5 us apart, given out of order; one overlap reads as no gap."""
    probe = benchmark("probe_turnaround")
    ts = np.array([9.0, 0.0, 4.5, 13.5, 17.0])  # 17.0 starts before 13.5 + 3 ends
    dur = np.full(5, 3.0)
    stats = probe.traced_stats(ts, dur)
    assert stats["traced_dur_us"] == 3.0
    # gaps: 1.5, 1.5, 1.5, 0 (overlap, clipped) -> median 1.5
    assert stats["traced_gap_us"] == 1.5
    assert probe.implied_turnaround(4.1, 3.0) == pytest.approx(1.1)


def test_without_cuda_it_says_so_and_fails(capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert benchmark("probe_turnaround").main([]) == 2
    assert "needs a CUDA device" in capsys.readouterr().err
