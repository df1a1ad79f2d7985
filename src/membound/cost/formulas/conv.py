"""Convolutions: the aten entry points a trace shows for forward and backward.

FLOPs: `torch.utils.flop_counter.conv_flop_count` (2 per multiply-add, groups folded into
the weight's in-channels, bias ignored). Bytes: input, weight, bias once; output once.
Post hoc the output shape comes from stride / padding / dilation / output_padding.
"""

from __future__ import annotations

from membound.cost.call import OpCall, TensorMeta
from membound.cost.formulas._torch_flops import conv_backward_flops, conv_flops
from membound.cost.registry import Cost, register, simple
from membound.dtypes import compute_key

# op -> argument positions: (bias, stride, padding, dilation, transposed, output_padding)
# None = the op does not take that argument.
_LAYOUT = {
    "aten::convolution": (2, 3, 4, 5, 6, 7),
    "aten::_convolution": (2, 3, 4, 5, 6, 7),
    "aten::conv1d": (2, 3, 4, 5, None, None),
    "aten::conv2d": (2, 3, 4, 5, None, None),
    "aten::conv3d": (2, 3, 4, 5, None, None),
    "aten::conv_transpose1d": (2, 3, 4, 7, True, 5),
    "aten::conv_transpose2d": (2, 3, 4, 7, True, 5),
    "aten::conv_transpose3d": (2, 3, 4, 7, True, 5),
    "aten::cudnn_convolution": (None, 3, 2, 4, None, None),
    "aten::cudnn_convolution_transpose": (None, 4, 2, 5, True, 3),
    "aten::mkldnn_convolution": (2, 4, 3, 5, None, None),
    "aten::miopen_convolution": (2, 4, 3, 5, None, None),
}


def _per_dim(value: object, n: int, default: int) -> list[int]:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return [default] * n
    if isinstance(value, int):
        return [value] * n
    values = [int(v) for v in value]  # type: ignore[union-attr]
    return values * n if len(values) == 1 else values


def conv_out_shape(
    x: tuple[int, ...],
    w: tuple[int, ...],
    stride: object,
    padding: object,
    dilation: object,
    transposed: bool,
    output_padding: object,
    groups: int,
) -> tuple[int, ...]:
    n = len(x) - 2
    s, p, d = _per_dim(stride, n, 1), _per_dim(padding, n, 0), _per_dim(dilation, n, 1)
    op = _per_dim(output_padding, n, 0)
    k = w[2:]
    if transposed:
        spatial = [
            (x[2 + i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + op[i] + 1 for i in range(n)
        ]
        return (x[0], w[1] * groups, *spatial)
    spatial = [(x[2 + i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(n)]
    return (x[0], w[0], *spatial)


@register(*_LAYOUT, family="conv")
def _conv(call: OpCall) -> Cost:
    x, w = call.tensor(0), call.tensor(1)
    b_i, s_i, p_i, d_i, t_i, op_i = _LAYOUT[call.name]
    transposed = bool(t_i is True or (isinstance(t_i, int) and call.arg(t_i) is True))
    if call.outputs:
        out = call.outputs[0]
    else:
        groups = _groups(call)
        out_shape = conv_out_shape(
            x.shape,
            w.shape,
            call.arg(s_i) if s_i is not None else 1,
            call.arg(p_i) if p_i is not None else 0,
            call.arg(d_i) if d_i is not None else 1,
            transposed,
            call.arg(op_i) if isinstance(op_i, int) and op_i is not True else 0,
            groups,
        )
        out = TensorMeta(out_shape, x.dtype)
    flops = conv_flops(x.shape, w.shape, out.shape, transposed)
    return simple(call, flops, [out], compute_key(x.dtype))


def _groups(call: OpCall) -> int:
    """groups: the int argument right after the list arguments, found per op layout."""
    pos = {
        "aten::convolution": 8,
        "aten::_convolution": 8,
        "aten::cudnn_convolution": 5,
        "aten::cudnn_convolution_transpose": 6,
        "aten::mkldnn_convolution": 6,
        "aten::miopen_convolution": 6,
        "aten::conv_transpose1d": 6,
        "aten::conv_transpose2d": 6,
        "aten::conv_transpose3d": 6,
    }.get(call.name, 6)
    g = call.arg(pos, 1)
    return g if isinstance(g, int) and not isinstance(g, bool) and g > 0 else 1


@register("aten::convolution_backward", family="conv")
def _conv_backward(call: OpCall) -> Cost:
    # (grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    #  output_padding, groups, output_mask)
    gy, x, w = call.tensor(0), call.tensor(1), call.tensor(2)
    transposed = bool(call.arg(7, False))
    mask = call.arg(10) or [True, True, True]
    flops = conv_backward_flops(gy.shape, x.shape, w.shape, transposed, mask)
    outs = []
    if mask[0]:
        outs.append(TensorMeta(x.shape, x.dtype))
    if mask[1]:
        outs.append(TensorMeta(w.shape, w.dtype))
    if len(mask) > 2 and mask[2] and call.arg(3) is not None:
        outs.append(TensorMeta((gy.shape[1],), gy.dtype))
    return simple(call, flops, outs, compute_key(x.dtype))
