"""membound's own add_norm custom ops are costed from their recorded arguments, and the eager
Function calls them while a profiler records CPU ops (so their kernels get that cost)."""

from __future__ import annotations

import gzip
import json

import pytest
import torch

from membound.cost.registry import Cost
from membound.cost.trace_args import cost_of

F, H = "float", "c10::BFloat16"


def test_forward_with_residual_hand_count():
    # x, residual [4096, 1024] bf16, weight/bias fp32, no dropout, LayerNorm, s stored bf16
    dims = [[4096, 1024], [4096, 1024], [], [1024], [1024], [], [], [], [], [], []]
    types = [H, H, "", F, F, "Scalar", "Scalar", "Scalar", "Scalar", "ScalarType", "ScalarType"]
    concrete = ["", "", "", "", "", "0.", "False", "1.0000000000000001e-05", "True", "15", "15"]
    got = cost_of("membound::add_norm_fwd", dims, types, concrete)
    n, rows = 4096 * 1024, 4096
    reads = 2 * n * 2 + 2 * 1024 * 4
    writes = n * 2 + n * 2 + 2 * rows * 4  # y, s, mean, rstd
    assert got == Cost(n * (5 + 2 + 1), reads + writes, "fp32_vector", True, "add_norm", reads)


def test_rms_forward_without_s_and_with_dropout():
    dims = [[8, 64], [], [], [64], [], [], [], [], [], [], []]
    types = [F, "", "", F, "", "Scalar", "Scalar", "Scalar", "Scalar", "ScalarType", "ScalarType"]
    concrete = ["", "", "", "", "", "0.10000000000000001", "True", "1e-06", "True", "6", "6"]
    got = cost_of("membound::add_norm_fwd", dims, types, concrete)
    n = 8 * 64
    # reads x, weight; writes y, s (dropout: stored), rstd only (RMS)
    assert got.bytes == n * 4 + 64 * 4 + n * 4 + n * 4 + 8 * 4
    assert got.flops == n * (3 + 1 + 2)


def test_backward_hand_count():
    # dy, ds [2048, 768] fp32, src, mean, rstd, weight, seed (CPU int64 [2])
    dims = [[2048, 768], [2048, 768], [2048, 768], [2048], [2048], [768], [2]] + [[]] * 9
    types = [F, F, F, F, F, F, "long int", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar",
             "Scalar", "ScalarType", "ScalarType", "ScalarType"]  # fmt: skip
    concrete = [""] * 7 + ["0.", "False", "True", "True", "True", "False", "6", "6", "6"]
    got = cost_of("membound::add_norm_bwd", dims, types, concrete)
    n = 2048 * 768
    reads = 3 * n * 4 + 2 * 2048 * 4 + 768 * 4 + 2 * 8
    writes = n * 4 + 2 * 768 * 4  # dx (dres is dx: same dtype, no dropout), dweight, dbias
    assert got == Cost(n * (8 + 2 + 1), reads + writes, "fp32_vector", True, "add_norm", reads)


def test_profiled_eager_calls_record_the_custom_ops(tmp_path, monkeypatch):
    """Under a profiler with shapes, the eager Function's forward and backward show up as the
    custom ops with their arguments, and give the same values and gradients as unprofiled."""
    from torch.profiler import ProfilerActivity, profile

    from membound import _env
    from membound.nn import FusedAddLayerNorm

    monkeypatch.setenv(_env.DISABLE_TRITON_VAR, "1")  # the reference path: fast on the CPU
    torch.manual_seed(0)
    m = FusedAddLayerNorm(48, prenorm=False)
    x = torch.randn(6, 48, requires_grad=True)
    r = torch.randn(6, 48, requires_grad=True)
    g = torch.randn(6, 48)

    def run():
        x.grad = r.grad = m.weight.grad = m.bias.grad = None
        y = m(x, r)
        y.backward(g)
        return y.detach(), x.grad.clone(), r.grad.clone(), m.weight.grad.clone()

    plain = run()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        profiled = run()
    for a, b in zip(plain, profiled, strict=True):
        torch.testing.assert_close(a, b)
    path = tmp_path / "t.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    by_name = {e["name"]: e for e in events if e.get("cat") == "cpu_op"}
    assert "membound::add_norm_fwd" in by_name and "membound::add_norm_bwd" in by_name
    fwd = by_name["membound::add_norm_fwd"]["args"]
    assert fwd["Input Dims"][:2] == [[6, 48], [6, 48]]
    cost = cost_of("membound::add_norm_fwd", fwd["Input Dims"], fwd["Input type"],
                   fwd.get("Concrete Inputs"))  # fmt: skip
    assert cost.exact and cost.family == "add_norm"
    n = 6 * 48
    # reads x, residual, weight, bias; writes y, s, mean, rstd (all fp32)
    assert cost.bytes == 2 * n * 4 + 2 * 48 * 4 + 2 * n * 4 + 2 * 6 * 4
    with gzip.open(tmp_path / "t.json.gz", "wt") as f:  # also loadable as a trace file
        json.dump({"traceEvents": events}, f)


def test_timeline_pass_keeps_the_cheap_path(monkeypatch):
    from membound import _profiling
    from membound.nn import add_norm_op

    monkeypatch.setattr(_profiling, "timeline_pass", True)
    monkeypatch.setattr(torch.autograd.profiler, "_is_profiler_enabled", True)
    assert add_norm_op.profiled() is False
    monkeypatch.setattr(_profiling, "timeline_pass", False)
    assert add_norm_op.profiled() is True


@pytest.mark.parametrize("name", ["membound::add_norm_fwd", "membound::add_norm_bwd"])
def test_missing_arguments_fall_back(name):
    got = cost_of(name, [], [], [])
    assert not got.exact
