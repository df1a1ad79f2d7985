"""Pooling costs: output shapes against torch's on random windows (ceil_mode included),
bytes and FLOPs by hand for ResNet's stem max pool as an H200 trace records it."""

from __future__ import annotations

import random

import pytest
import torch

from membound.cost import cost_of
from membound.cost.call import TensorMeta
from membound.cost.formulas.pool import pooled_shape

STEM = (
    [[128, 64, 112, 112], [], [], [], [], []],
    ["float", "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
    ["", "[3, 3]", "[2, 2]", "[1, 1]", "[1, 1]", "False"],
)


@pytest.mark.parametrize("seed", range(40))
def test_pooled_shape_matches_torch(seed):
    rng = random.Random(seed)
    k = [rng.randint(1, 4), rng.randint(1, 4)]
    s = [rng.randint(1, 3), rng.randint(1, 3)]
    p = [rng.randint(0, k[0] // 2), rng.randint(0, k[1] // 2)]
    d = [rng.randint(1, 2), rng.randint(1, 2)]
    ceil = rng.random() < 0.5
    h, w = rng.randint(k[0] * d[0], 23), rng.randint(k[1] * d[1], 23)
    x = torch.empty(2, 3, h, w)
    out = torch.nn.functional.max_pool2d(x, k, s, p, d, ceil_mode=ceil)
    assert pooled_shape(TensorMeta(x.shape, "float32"), k, s, p, d, ceil) == tuple(out.shape)


def test_stem_max_pool_by_hand():
    cost = cost_of("aten::max_pool2d_with_indices", *STEM)
    out = 128 * 64 * 56 * 56
    assert cost.bytes == 128 * 64 * 112 * 112 * 4 + out * 4 + out * 8  # input, output, indices
    assert cost.read_bytes == 128 * 64 * 112 * 112 * 4  # the input; output and indices written
    assert cost.flops == out * 9 and cost.family == "pool"


def test_stem_max_pool_backward_by_hand():
    dims = [[128, 64, 56, 56], [128, 64, 112, 112], [], [], [], [], [], [128, 64, 56, 56]]
    types = ["float", "float", *["ScalarList"] * 4, "Scalar", "long int"]
    cost = cost_of("aten::max_pool2d_with_indices_backward", dims, types,
                   ["", "", "[3, 3]", "[2, 2]", "[1, 1]", "[1, 1]", "False", ""])  # fmt: skip
    grad = 128 * 64 * 56 * 56
    assert cost.bytes == grad * 4 + grad * 8 + 128 * 64 * 112 * 112 * 4
    assert cost.read_bytes == grad * 4 + grad * 8  # grad-output and indices read
    assert cost.flops == grad


def test_avg_pool_shapes_and_counts():
    x = torch.empty(4, 8, 17, 17)
    out = torch.nn.functional.avg_pool2d(x, 3, 2, 1, ceil_mode=True)
    cost = cost_of("aten::avg_pool2d", [[4, 8, 17, 17], [], [], [], [], [], []],
                   ["float", "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", ""],
                   ["", "[3, 3]", "[2, 2]", "[1, 1]", "True", "True", ""])  # fmt: skip
    assert cost.bytes == (x.numel() + out.numel()) * 4
    assert cost.read_bytes == x.numel() * 4
    assert cost.flops == out.numel() * 9
