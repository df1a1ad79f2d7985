"""Measuring ceilings for real: CPU quick run here; the full CUDA run on a GPU."""

from __future__ import annotations

import pytest
import torch

from membound.device import get_ceilings
from membound.device.measure import STEPS, step
from membound.errors import BadInput, NeedsGPU


def test_cpu_quick_measurement_is_plausible():
    c = get_ceilings("cpu", quick=True, progress=False)
    assert c.source == "measured" and c.device == "cpu"
    assert 1e8 < c.memory_bandwidth < 1e13
    assert 1e8 < c.read_bandwidth < 1e13
    assert set(c.flops) == {"fp32", "bf16"}
    assert all(1e8 < v < 1e15 for v in c.flops.values())
    assert c.seconds is not None and c.seconds < 30
    assert c.transfers == []
    # every figure keeps the spread of its repeated runs around the median it reports
    assert set(c.spread) == {"memory_bandwidth", "read_bandwidth", "flops.fp32", "flops.bf16"}
    for figure, value in [("memory_bandwidth", c.memory_bandwidth),
                          ("read_bandwidth", c.read_bandwidth),
                          ("flops.fp32", c.flops["fp32"]), ("flops.bf16", c.flops["bf16"])]:  # fmt: skip
        slow, fast = c.spread_of(figure)
        assert slow <= value * (1 + 1e-9) and fast >= value * (1 - 1e-9), figure
    # each matmul ceiling is the best rate of its sweep (one shape in a quick run)
    for key in ("fp32", "bf16"):
        assert c.flops[key] == max(r["flops"] for r in c.matmul_sweep[key])


def test_sweep_takes_the_best_shape_and_keeps_every_rate():
    from membound.device.ceilings import Ceilings
    from membound.device.measure import _sweep
    from membound.device.timing import Timed

    ms = {(64, 64, 64): 1.0, (128, 128, 128): 2.0, (256, 32, 64): 0.8}  # 128³: 8x the work

    def fake(m, n, k):
        return Timed(ms[(m, n, k)], ms[(m, n, k)] * 0.9, ms[(m, n, k)] * 1.2, 5)

    c = Ceilings(device="cpu", name="x", memory_bandwidth=1.0)
    _sweep(c, "fp32", tuple(ms), fake)
    rates = {(r["m"], r["n"], r["k"]): r["flops"] for r in c.matmul_sweep["fp32"]}
    assert rates[(128, 128, 128)] == pytest.approx(2 * 128**3 / 2e-3)
    assert c.flops["fp32"] == max(rates.values()) == rates[(128, 128, 128)]
    slow, fast = c.spread_of("flops.fp32")
    assert slow == pytest.approx(c.flops["fp32"] / 1.2) and fast == pytest.approx(
        c.flops["fp32"] / 0.9
    )


def test_steps_refuse_duplicates():
    with pytest.raises(ValueError, match="twice"):
        step("cpu", "copy", "again")(lambda c, p: None)
    keys = [(s.device, s.key) for s in STEPS]
    assert len(keys) == len(set(keys))
    assert sum(s.device == "cuda" and s.key.startswith(("h2d", "d2h")) for s in STEPS) == 8


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error")
def test_cuda_without_gpu_says_so():
    with pytest.raises(NeedsGPU, match="--device cpu"):
        get_ceilings("cuda")


@pytest.mark.parametrize("device", ["tpu", "mps", "nonsense:3"])
def test_unsupported_device_is_bad_input(device):
    with pytest.raises((BadInput, NeedsGPU)):
        get_ceilings(device)


@pytest.mark.gpu
def test_cuda_quick_measurement_shows_the_pageable_trap():
    c = get_ceilings("cuda", quick=True, progress=False)
    assert c.memory_bandwidth > 1e11 and c.read_bandwidth > 1e11
    for key in ("fp32", "tf32", "fp16", "bf16"):
        assert c.flops[key] > 1e12, key
    if torch.cuda.get_device_capability() >= (8, 0):
        assert c.flops["bf16"] > c.flops["fp32"]
    assert len(c.transfers) == 8
    pinned_nb = c.transfer("h2d", "pinned", True)
    pageable_nb = c.transfer("h2d", "pageable", True)
    # the key fact: non_blocking from pageable memory still blocks the host; from pinned it does not
    assert pageable_nb.host_blocked_fraction > 0.5
    assert pinned_nb.host_blocked_fraction < 0.3
    assert pinned_nb.bandwidth > pageable_nb.bandwidth
    slow, fast = pinned_nb.bandwidth_spread
    assert slow <= pinned_nb.bandwidth <= fast
    slow, fast = c.spread_of("flops.bf16")
    assert slow <= c.flops["bf16"] <= fast
    assert c.datasheet is None or c.datasheet["memory_bandwidth"] > 0
