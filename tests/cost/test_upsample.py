"""Upsampling costs: the output (grad-input) shape against torch's on random sizes and modes,
bytes and FLOPs by hand for DeepLabV3's heads as an H200 trace recorded them."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

from membound.analysis.fixes import memory_bound_fix, op_family
from membound.analysis.remedies import remedies_of
from membound.cost import cost_of

MODES = {"nearest": ("aten::upsample_nearest2d", 0), "bilinear": ("aten::upsample_bilinear2d", 4),
         "bicubic": ("aten::upsample_bicubic2d", 16)}  # fmt: skip


@pytest.mark.parametrize("seed", range(12))
def test_forward_and_backward_bytes_follow_torchs_shapes(seed):
    rng = random.Random(seed)
    mode = rng.choice(sorted(MODES))
    name, points = MODES[mode]
    x = torch.randn(rng.randint(1, 3), rng.randint(1, 5), rng.randint(1, 9), rng.randint(1, 9),
                    requires_grad=True)  # fmt: skip
    size = [rng.randint(1, 20), rng.randint(1, 20)]
    kw = {} if mode == "nearest" else {"align_corners": False}
    y = F.interpolate(x, size=size, mode=mode, **kw)
    args = ([list(x.shape), [], []], ["float", "ScalarList", "Scalar"], ["", str(size), "False"])
    cost = cost_of(name, *args)
    assert cost.family == "upsample"
    assert cost.bytes == (x.numel() + y.numel()) * 4 and cost.read_bytes == x.numel() * 4
    assert cost.flops == 2 * points * y.numel()
    back = cost_of(f"{name}_backward", [list(y.shape), [], [], [], [], []],
                   ["float", "ScalarList", "ScalarList", "Scalar", "", ""],
                   ["", str(size), str(list(x.shape)), "False", "", ""])  # fmt: skip
    assert back.read_bytes == y.numel() * 4 and back.bytes == (x.numel() + y.numel()) * 4
    assert back.flops == 2 * points * y.numel()


def test_deeplab_head_backward_by_hand():
    """The classifier's 21-class logits, 60 x 60 -> 480 x 480, backward in fp32 (autocast runs
    interpolate in fp32), as the H200 trace recorded it."""
    cost = cost_of("aten::upsample_bilinear2d_backward", [[8, 21, 480, 480], [], [], [], [], []],
                   ["float", "ScalarList", "ScalarList", "Scalar", "", ""],
                   ["", "[480, 480]", "[8, 21, 60, 60]", "False", "", ""])  # fmt: skip
    grad, grad_in = 8 * 21 * 480 * 480, 8 * 21 * 60 * 60
    assert cost.read_bytes == grad * 4 and cost.bytes == (grad + grad_in) * 4
    assert cost.flops == 8 * grad


@pytest.mark.parametrize("seed", range(8))
def test_scale_factors_give_torchs_output_shape(seed):
    """`F.interpolate(scale_factor=)` records the `.vec` overload with no output_size and the
    factors last (the DDPM U-Net's 2x nearest, H100 2026-12-06, warned and went uncosted)."""
    rng = random.Random(seed)
    mode = rng.choice(sorted(MODES))
    name, points = MODES[mode]
    x = torch.randn(rng.randint(1, 3), rng.randint(1, 5), rng.randint(1, 9), rng.randint(1, 9))
    factors = [rng.choice([0.5, 1.5, 2.0, 3.0, 1.7]), rng.choice([0.5, 2.0, 2.5, 4.0])]
    kw = {} if mode == "nearest" else {"align_corners": False}
    y = F.interpolate(x, scale_factor=factors, mode=mode, **kw)
    if mode == "nearest":  # (input, output_size, scale_factors)
        args = ([list(x.shape), [], []], ["float", "", "ScalarList"], ["", "", str(factors)])
    else:  # (input, output_size, align_corners, scale_factors)
        args = ([list(x.shape), [], [], []], ["float", "", "Scalar", "ScalarList"],
                ["", "", "False", str(factors)])  # fmt: skip
    cost = cost_of(name, *args)
    assert cost.exact and cost.family == "upsample"
    assert cost.bytes == (x.numel() + y.numel()) * 4 and cost.read_bytes == x.numel() * 4
    assert cost.flops == 2 * points * y.numel()


def test_a_missing_size_is_no_guess():
    """No output_size recorded: an unknown op (with a warning), never a guessed cost."""
    with pytest.warns(RuntimeWarning, match="no output_size"):
        cost = cost_of("aten::upsample_bilinear2d", [[1, 2, 3, 4], [], []],
                       ["float", "", "Scalar"], ["", "", "False"])  # fmt: skip
    assert not cost.exact and cost.family == "unknown" and cost.flops == 0


def test_upsample_is_its_own_family_with_channels_last_as_its_fix():
    """'upsample_bilinear2d' holds 'linear': it once fell in the matmul family (no remedy)."""
    name = "aten::upsample_bilinear2d_backward"
    assert op_family(name) == "upsample" and op_family("aten::linear") == "matmul"
    assert remedies_of("memory-bound-op", {"op": name}) == ("channels_last",)
    fix = memory_bound_fix(name)
    assert "channels_last" in fix and "expand" in fix and "LayerNorm" not in fix
