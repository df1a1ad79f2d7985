"""Matrix products: mm, addmm, bmm, baddbmm, matmul, linear, _scaled_mm.

FLOPs: 2·M·N·K per product (torch.utils.flop_counter's convention: a multiply-add is 2,
the bias/beta term is not counted). Bytes: every operand once (a broadcast bias counts its
real extent, e.g. N elements for a (N,) bias), the result once.
Compute key: the operands' dtype ("fp32" stays "fp32"; the roofline maps it to "tf32"
when TF32 is on).
"""

from __future__ import annotations

import math

from membound.cost.call import OpCall, TensorMeta, broadcast
from membound.cost.formulas._torch_flops import bmm_flops, mm_flops
from membound.cost.registry import Cost, register, simple
from membound.dtypes import as_dtype, compute_key


def _matmul(call: OpCall, a: TensorMeta, b: TensorMeta, out_dtype: str | None = None) -> Cost:
    out_dtype = out_dtype or a.dtype
    if a.ndim == 2 and b.ndim == 2:
        flops = mm_flops(a.shape, b.shape)
        out_shape: tuple[int, ...] = (a.shape[0], b.shape[1])
    elif a.ndim == 3 and b.ndim == 3:
        flops = bmm_flops(a.shape, b.shape)
        out_shape = (a.shape[0], a.shape[1], b.shape[2])
    else:  # general matmul: vectors and broadcast batch dims
        sa = (1, *a.shape) if a.ndim == 1 else a.shape
        sb = (*b.shape, 1) if b.ndim == 1 else b.shape
        batch = broadcast(sa[:-2], sb[:-2])
        m, k, n = sa[-2], sa[-1], sb[-1]
        flops = 2 * math.prod(batch) * m * n * k
        out_shape = (*batch, *([m] if a.ndim > 1 else []), *([n] if b.ndim > 1 else []))
    return simple(call, flops, [TensorMeta(out_shape, out_dtype)], compute_key(a.dtype))


@register("aten::mm", "aten::bmm", "aten::matmul", family="matmul")
def _mm(call: OpCall) -> Cost:
    return _matmul(call, call.tensor(0), call.tensor(1))


@register("aten::addmm", "aten::baddbmm", "aten::addbmm", family="matmul")
def _addmm(call: OpCall) -> Cost:
    # (self/bias, mat1, mat2, beta, alpha)
    return _matmul(call, call.tensor(1), call.tensor(2))


@register("aten::linear", family="matmul")
def _linear(call: OpCall) -> Cost:
    # (input, weight (N, K), bias?): input @ weight.T
    x, w = call.tensor(0), call.tensor(1)
    rows = x.numel // x.shape[-1]
    n = w.shape[0] if w.ndim == 2 else 1
    flops = mm_flops((rows, x.shape[-1]), (w.shape[-1], n))
    out = TensorMeta((*x.shape[:-1], *w.shape[:-1]), x.dtype)
    return simple(call, flops, [out], compute_key(x.dtype))


@register("aten::_scaled_mm", family="matmul")
def _scaled_mm(call: OpCall) -> Cost:
    # (self, mat2, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum)
    a, b = call.tensor(0), call.tensor(1)
    return _matmul(call, a, b, as_dtype(call.arg(6), a.dtype))
