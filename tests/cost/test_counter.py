"""Live counter on Linear(64,128) + LayerNorm(128) + GELU with a (32, 64) fp32 input."""

from __future__ import annotations

import torch

from membound.cost import Cost, CostCounter

from .scenarios import mlp_model

F32 = 4
B, IN, OUT = 32, 64, 128
N = B * OUT  # elements of every (32, 128) activation

# reads bias, x, weight; writes y (the last argument: bytes read)
ADDMM = Cost(2 * B * IN * OUT, F32 * (OUT + B * IN + IN * OUT + N), "fp32", True, "matmul",
             F32 * (OUT + B * IN + IN * OUT))  # fmt: skip
# 5 FLOPs/element + weight + bias; reads x, w, b; writes y, mean, rstd (32 each)
LAYER_NORM = Cost(7 * N, F32 * (N + OUT + OUT + N + B + B), "fp32_vector", True, "norm",
                  F32 * (N + OUT + OUT))  # fmt: skip
GELU = Cost(5 * N, F32 * (N + N), "fp32_vector", True, "pointwise", F32 * N, largest_read=F32 * N)


def test_forward_exact_per_op():
    model = mlp_model()
    x = torch.randn(B, IN)
    with CostCounter() as c:
        model(x)
    costly = [(r.name, r.cost) for r in c.records if r.cost.family != "view"]
    assert costly == [
        ("aten::addmm", ADDMM),
        ("aten::native_layer_norm", LAYER_NORM),
        ("aten::gelu", GELU),
    ]
    # the only other op is the weight transpose, a free view
    assert [r.name for r in c.records if r.cost.family == "view"] == ["aten::t"]
    assert c.total.flops == ADDMM.flops + LAYER_NORM.flops + GELU.flops
    assert c.total.bytes == ADDMM.bytes + LAYER_NORM.bytes + GELU.bytes
    # the free view reads nothing: every call's split is known, so the total's is
    assert c.total.read_bytes == ADDMM.read_bytes + LAYER_NORM.read_bytes + GELU.read_bytes
    assert c.records[1].input_shapes[:2] == [[OUT], [B, IN]]
    assert c.records[1].dtypes[:3] == ["float32"] * 3


def test_forward_backward_exact_per_op():
    model = mlp_model()
    x = torch.randn(B, IN, requires_grad=True)
    with CostCounter() as c:
        model(x).sum().backward()
    ops = c.by_op()
    assert ops["aten::addmm"].flops == ADDMM.flops
    assert ops["aten::native_layer_norm"].bytes == LAYER_NORM.bytes
    # loss = y.sum(): reads y, writes one float; bias grad = dy.sum(0): reads dy, writes 128
    assert ops["aten::sum"].calls == 2
    assert ops["aten::sum"].flops == 2 * N
    assert ops["aten::sum"].bytes == F32 * (N + 1) + F32 * (N + OUT)
    # dy starts as ones expanded from one element: its storage is 4 bytes
    gelu_bwd = ops["aten::gelu_backward"]
    assert (gelu_bwd.flops, gelu_bwd.bytes) == (10 * N, F32 * (1 + N + N))
    # dx (8) + dweight (2) + dbias (1) per element; reads dy, x, mean, rstd, weight
    # (bias only lends its shape); writes dx, dweight, dbias
    ln_bwd = ops["aten::native_layer_norm_backward"]
    assert ln_bwd.flops == 11 * N
    assert ln_bwd.bytes == F32 * (N + N + B + B + OUT) + F32 * (N + OUT + OUT)
    # dx = dy @ W (32x128 @ 128x64) and dW = dyᵀ @ x (128x32 @ 32x64)
    mm = ops["aten::mm"]
    assert mm.calls == 2
    assert mm.flops == 2 * (2 * B * OUT * IN)
    assert mm.bytes == 2 * F32 * (N + OUT * IN + B * IN)
    assert ops["aten::ones_like"].bytes == F32  # the seed gradient, one element written
    expected_total = sum(t.flops for t in ops.values())
    assert (
        c.total.flops
        == expected_total
        == (ADDMM.flops + LAYER_NORM.flops + GELU.flops + 2 * N + 10 * N + 11 * N + mm.flops)
    )
    assert c.total.exact


def test_inplace_reads_inputs_and_writes_self():
    a, b = torch.randn(16, 8), torch.randn(8)
    with CostCounter() as c:
        a.add_(b)
        a.mul_(2.0)
    add_, mul_ = (r.cost for r in c.records)
    assert (add_.flops, add_.bytes) == (128, F32 * (128 + 8 + 128))
    assert (mul_.flops, mul_.bytes) == (128, F32 * (128 + 128))


def test_same_tensor_twice_is_read_once():
    a = torch.randn(10, 10)
    with CostCounter() as c:
        _ = a * a
    assert c.records[0].cost.bytes == F32 * (100 + 100)


def test_broadcast_input_counts_its_storage():
    bias = torch.randn(64)
    x = torch.randn(32, 64)
    with CostCounter() as c:
        _ = x + bias.expand(32, 64)
    add = [r for r in c.records if r.name == "aten::add"][0]
    assert add.cost.bytes == F32 * (32 * 64 + 64 + 32 * 64)
