"""`launch-bound` against planted traces (hand-computed numbers)."""

from __future__ import annotations

import pytest

from support.analysis import by_code, run


def test_launch_bound(ceilings):
    a = run("synthetic_launch_bound", ceilings)
    assert [f.code for f in a.findings] == ["launch-bound"]
    f = a.findings[0]
    # 199 gaps of 10 µs between kernels per step; before step 0's first kernel 10 µs: the
    # host inside aten::relu (0-4, which launches it) then in the glue before the next
    # relu (4-15); before step 1's first kernel a 10 µs gap after step 0's last kernel:
    # (1990 + 10 + 1990 + 10) / 2 µs
    assert f.time_lost_ms_per_step == pytest.approx(2.0)
    assert f.evidence["kernels_per_step"] == 200
    assert f.evidence["median_kernel_us"] == pytest.approx(5.0)
    assert "torch.compile" in f.fix and "CUDA graph" in f.fix


def test_launch_gaps_between_the_ops_of_the_memory_block(ceilings):
    # the GPU waits for the first launch: 90 µs per step inside the ops that launch the
    # kernels (mm 10-30, add 40-60, layer_norm 70-100) and the 10 µs glue between them
    f = by_code(run("synthetic_memory_block", ceilings))["launch-bound"]
    assert f.time_lost_ms_per_step == pytest.approx(0.09)
