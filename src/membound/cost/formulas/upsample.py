"""Upsampling (interpolation): nearest, linear, bilinear, bicubic and trilinear, forward and
backward.

Forward `(input, output_size, [align_corners,] scales...)`: the output is the input's batch
and channel dims with `output_size` as its spatial dims. `F.interpolate(scale_factor=)`
records the `.vec` overload, `(input, None, scale_factors)` (the DDPM U-Net's 2x nearest,
2026-12-06): the output's spatial dims are then the input's times each factor, rounded down
as ATen does. Backward `(grad_output, output_size,
input_size, [align_corners,] scales...)`: grad-input has `input_size`, in grad-output's dtype.
FLOPs per output element (forward) or grad-output element (backward): one multiply-add per
input point the mode weighs (nearest 0, linear 2, bilinear 4, bicubic 16, trilinear 8), two
FLOPs each. Bytes: the input (grad-output) read once, the output (grad-input) written once:
the minimum. A backward that scatters with atomics into a small grad-input (bilinear's, at
8 x 21 x 480 x 480 -> 60 x 60 in fp32, ran at 0.7% of the H200's memory roof in torchvision's
DeepLabV3) shows as far below its roof, which it is.
"""

from __future__ import annotations

from membound.cost.call import OpCall, TensorMeta
from membound.cost.registry import VECTOR, Cost, read_write, register

#: input points each output point weighs, per mode
_POINTS = {"nearest": 0, "linear": 2, "bilinear": 4, "bicubic": 16, "trilinear": 8}
_MODES = tuple(_POINTS)


def _mode(name: str) -> str:
    low = name.removeprefix("aten::upsample_")
    for mode in sorted(_MODES, key=len, reverse=True):  # "bilinear" before "linear"
        if low.startswith(mode) or low.startswith("_" + mode):
            return mode
    return "nearest"


def _spatial(name: str) -> int:
    for n in (3, 2, 1):
        if f"{n}d" in name:
            return n
    return 2


_FORWARD = [
    f"aten::upsample_{mode}{n}d"
    for mode, n in (("nearest", 1), ("nearest", 2), ("nearest", 3), ("linear", 1),
                    ("bilinear", 2), ("bicubic", 2), ("trilinear", 3))
] + ["aten::_upsample_nearest_exact1d", "aten::_upsample_nearest_exact2d",
     "aten::_upsample_nearest_exact3d", "aten::_upsample_bilinear2d_aa",
     "aten::_upsample_bicubic2d_aa"]  # fmt: skip


@register(*_FORWARD, family="upsample")
def _upsample(call: OpCall) -> Cost:
    x = call.tensor(0)
    spatial = _spatial(call.name)
    size = call.int_list(1)
    if size is None and x is not None:
        size = _scaled(x.shape[x.ndim - spatial :], call.arg(len(call.inputs) - 1))
    if size is None or len(size) != spatial:
        raise ValueError(f"{call.name}: no output_size of {spatial} dims")
    out = TensorMeta((*x.shape[: x.ndim - spatial], *size), x.dtype)
    return read_write(2 * _POINTS[_mode(call.name)] * out.numel, x.nbytes, out.nbytes, VECTOR)


def _scaled(dims, factors) -> list[int] | None:
    """`dims` times `factors` (the `.vec` overload's scale_factors, one per spatial dim),
    floored; None unless both are there, one factor each."""
    if not isinstance(factors, (list, tuple)) or len(factors) != len(dims):
        return None
    if not all(isinstance(f, (int, float)) and not isinstance(f, bool) for f in factors):
        return None
    return [int(d * f) for d, f in zip(dims, factors, strict=True)]


@register(*(f"{n}_backward" for n in _FORWARD), family="upsample")
def _upsample_backward(call: OpCall) -> Cost:
    grad = call.tensor(0)
    size = call.int_list(2)
    if size is None or len(size) != grad.ndim:
        raise ValueError(f"{call.name}: no input_size of {grad.ndim} dims")
    grad_in = TensorMeta(tuple(size), grad.dtype)
    flops = 2 * _POINTS[_mode(call.name)] * grad.numel
    return read_write(flops, grad.nbytes, grad_in.nbytes, VECTOR)
