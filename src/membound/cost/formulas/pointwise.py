"""Pointwise ops (unary, binary, ternary, activation backward), in-place variants included.

FLOPs per output element: each elementary operation (add, mul, compare, select, exp, log,
sqrt, erf, tanh, ...) counts 1. Composite activations count their elementary ops:
sigmoid 4 (neg, exp, add, div), silu 4 (x / (1 + exp(-x))), gelu 5 (erf form; the tanh
approximation is counted the same because a trace does not record the mode), mish 5,
softplus 3, elu 3; backward: gelu 10, silu 6, sigmoid/tanh 3, threshold (relu) 1.
add/sub's alpha is assumed fused (no extra FLOP).
Bytes: each distinct tensor input once at its real storage extent (a broadcast bias costs
its own size), the output once. In-place ops (`add_`) read their inputs, `self` included,
and write `self`. The output shape is the broadcast of the tensor inputs; its dtype
follows torch's type promotion (bool for comparisons). The largest tensor input's bytes are
`Cost.largest_read`: where every read fits in L2 on its own, a call may find its inputs
there, written by the kernels just before it (`analysis.roofline.call_memory_roof`'s
"l2-reads" roof). On the H100 (2026-12-06, `tests/fixtures/h100_real_vit_timm_truth3`, the
ceilings measured that day) timm's ViT-B/16 ran its backward's fp32 residual-gradient
`add_` (two 38.7 MB reads, 50 MiB of L2) at 105.5% of the HBM roof for its mix.
"""

from __future__ import annotations

import dataclasses

from membound.cost.call import OpCall, TensorMeta, broadcast, promote
from membound.cost.registry import VECTOR, Cost, register, simple

UNARY_1 = (
    "relu abs neg exp exp2 expm1 log log2 log10 log1p sqrt rsqrt reciprocal sin cos tan "
    "asin acos atan sinh cosh tanh erf erfc erfinv sign sgn floor ceil round trunc frac "
    "clamp clamp_min clamp_max hardtanh threshold square nan_to_num bitwise_not "
    "logical_not relu6 positive signbit isnan isinf isfinite isneginf isposinf"
).split()

BINARY_1 = (
    "add sub rsub mul div true_divide floor_divide maximum minimum fmax fmin fmod remainder "
    "pow eq ne lt le gt ge logical_and logical_or logical_xor bitwise_and bitwise_or "
    "bitwise_xor atan2 copysign where masked_fill leaky_relu threshold_backward"
).split()

FLOPS_PER_ELEMENT: dict[str, int] = {
    **dict.fromkeys(UNARY_1, 1),
    **dict.fromkeys(BINARY_1, 1),
    "sigmoid": 4,
    "silu": 4,
    "gelu": 5,
    "mish": 5,
    "softplus": 3,
    "elu": 3,
    "selu": 4,
    "celu": 4,
    "hardswish": 4,
    "hardsigmoid": 3,
    "xlogy": 2,
    "hypot": 3,
    "addcmul": 3,
    "addcdiv": 3,
    "lerp": 3,
    "gelu_backward": 10,
    "silu_backward": 6,
    "sigmoid_backward": 3,
    "tanh_backward": 3,
    "hardtanh_backward": 2,
    "leaky_relu_backward": 2,
    "elu_backward": 3,
    "softplus_backward": 4,
    "hardswish_backward": 3,
    "hardsigmoid_backward": 2,
    "mish_backward": 10,
}

BOOL_OUTPUT = set(
    "eq ne lt le gt ge logical_and logical_or logical_xor logical_not signbit isnan isinf "
    "isfinite isneginf isposinf".split()
)


def pointwise_cost(call: OpCall, flops_per_element: int) -> Cost:
    base = call.name.split("::")[-1]
    inplace = base.endswith("_")
    tensors = call.tensors()
    if inplace and tensors:
        out = TensorMeta(tensors[0].shape, tensors[0].dtype)
    else:
        shape = broadcast(*(t.shape for t in tensors))
        if base in BOOL_OUTPUT:
            dtype = "bool"
        else:
            dtype = promote([a for a in call.inputs[:2] if a is not None])
        out = TensorMeta(shape, dtype)
    n = call.outputs[0].numel if call.outputs else out.numel
    cost = simple(call, n * flops_per_element, [out], VECTOR)
    if not tensors or cost.read_bytes is None:
        return cost
    return dataclasses.replace(cost, largest_read=float(max(t.nbytes for t in tensors)))


def _make(flops: int):
    def formula(call: OpCall) -> Cost:
        return pointwise_cost(call, flops)

    return formula


for _op, _flops in FLOPS_PER_ELEMENT.items():
    register(f"aten::{_op}", f"aten::{_op}_", family="pointwise")(_make(_flops))
