"""Pooling: max pooling with its indices (forward and backward) and average pooling.

Output size per spatial dim: floor((size + 2·pad − dilation·(k − 1) − 1) / stride) + 1
(ceil with `ceil_mode`, as long as the last window starts inside the padded input);
`stride=[]` means the kernel size.
FLOPs: max/avg pool forward, one comparison or add per window element per output element
(k_h·k_w per output); backward, one accumulate per grad-output element (avg: per window
element). Bytes: the input once, the output once, max pool's int64 indices once (written
forward, read backward); backward reads grad-output (and indices) and writes grad-input.
"""

from __future__ import annotations

import math

from membound.cost.call import OpCall, TensorMeta
from membound.cost.registry import VECTOR, Cost, read_write, register


def _window(
    call: OpCall, first: int, spatial: int
) -> tuple[list[int], list[int], list[int], list[int], bool]:
    """(kernel, stride, padding, dilation, ceil_mode) from the argument at `first` on."""

    def per_dim(value, default: int) -> list[int]:
        if value is None or isinstance(value, (bool, str)) or value == []:
            return [default] * spatial
        if isinstance(value, int):
            return [value] * spatial
        values = [int(v) for v in value]
        return values * spatial if len(values) == 1 else values

    kernel = per_dim(call.arg(first), 1)
    stride_arg = call.arg(first + 1)
    stride = kernel if stride_arg in (None, []) else per_dim(stride_arg, 1)
    padding = per_dim(call.arg(first + 2), 0)
    dilation = per_dim(call.arg(first + 3), 1)
    ceil_mode = bool(call.arg(first + 4, False))
    return kernel, stride, padding, dilation, ceil_mode


def pooled_shape(x: TensorMeta, kernel, stride, padding, dilation, ceil_mode) -> tuple[int, ...]:
    spatial = len(kernel)
    out = list(x.shape[: x.ndim - spatial])
    for size, k, s, p, d in zip(
        x.shape[x.ndim - spatial :], kernel, stride, padding, dilation, strict=True
    ):
        span = size + 2 * p - d * (k - 1) - 1
        n = (math.ceil(span / s) if ceil_mode else span // s) + 1
        if ceil_mode and (n - 1) * s >= size + p:  # the last window must start inside
            n -= 1
        out.append(max(n, 0))
    return tuple(out)


@register("aten::max_pool2d_with_indices", "aten::max_pool3d_with_indices", family="pool")
def _max_pool(call: OpCall) -> Cost:
    x = call.tensor(0)
    spatial = 3 if call.name.endswith("3d_with_indices") else 2
    kernel, stride, padding, dilation, ceil_mode = _window(call, 1, spatial)
    out = TensorMeta(pooled_shape(x, kernel, stride, padding, dilation, ceil_mode), x.dtype)
    window = math.prod(kernel)
    indices = TensorMeta(out.shape, "int64")
    return read_write(out.numel * window, x.nbytes, out.nbytes + indices.nbytes, VECTOR)


@register(
    "aten::max_pool2d_with_indices_backward",
    "aten::max_pool3d_with_indices_backward",
    family="pool",
)
def _max_pool_backward(call: OpCall) -> Cost:
    # (grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices)
    grad, x, indices = call.tensor(0), call.tensor(1), call.tensor(7)
    grad_in = TensorMeta(x.shape, grad.dtype)
    idx = indices.nbytes if indices is not None else TensorMeta(grad.shape, "int64").nbytes
    return read_write(grad.numel, grad.nbytes + idx, grad_in.nbytes, VECTOR)


@register("aten::avg_pool2d", "aten::avg_pool3d", family="pool")
def _avg_pool(call: OpCall) -> Cost:
    x = call.tensor(0)
    spatial = 3 if call.name.endswith("3d") else 2
    kernel, stride, padding, _, ceil_mode = _window(call, 1, spatial)
    dilation = [1] * spatial  # avg_pool's next arguments are ceil_mode, count_include_pad
    ceil_mode = bool(call.arg(4, False))
    out = TensorMeta(pooled_shape(x, kernel, stride, padding, dilation, ceil_mode), x.dtype)
    return read_write(out.numel * math.prod(kernel), x.nbytes, out.nbytes, VECTOR)


@register("aten::avg_pool2d_backward", "aten::avg_pool3d_backward", family="pool")
def _avg_pool_backward(call: OpCall) -> Cost:
    # (grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor)
    grad, x = call.tensor(0), call.tensor(1)
    kernel = call.int_list(2, [1]) or [1]
    window = math.prod(kernel) if len(kernel) > 1 else kernel[0] ** (x.ndim - 2)
    grad_in = TensorMeta(x.shape, grad.dtype)
    return read_write(grad.numel * window, grad.nbytes, grad_in.nbytes, VECTOR)
