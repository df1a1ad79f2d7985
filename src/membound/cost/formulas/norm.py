"""Normalizations: layer/rms/group/batch norm, forward and backward.

FLOPs per element of x (per-row/per-channel scalar work such as rsqrt is ignored):
- layer/group/batch norm forward (batch stats): 5 = mean (1) + variance (2: subtract,
  square-accumulate) + normalize (2: subtract, multiply by rstd); +1 for a weight,
  +1 for a bias. Batch norm with running stats (eval): 2 + affine.
- rms norm forward: 3 = square-accumulate (2) + scale (1); +1 for a weight.
- backward: 8 per element for dx (recompute x̂ 2, dy·w 1, two reductions 2·2, combine 1);
  +2 for dweight (dy·x̂, accumulate), +1 for dbias. rms backward: 6 for dx, +2 dweight.
Bytes: every tensor input once (x, weight, bias, saved mean/rstd, dy), every output once
(y, mean, rstd / dx, dweight, dbias). Batch norm in training also rewrites its running
mean/var in place: counted as written.
Post hoc, saved statistics are fp32 for 16-bit inputs (acc type) and one per row/group.
"""

from __future__ import annotations

from membound.cost.call import OpCall, TensorMeta, distinct_bytes
from membound.cost.registry import VECTOR, Cost, out_bytes, read_write, register, simple

NORM_FWD = 5
AFFINE = 1  # per element, for each of weight and bias
BN_EVAL_FWD = 2
RMS_FWD = 3
NORM_BWD_DX = 8
NORM_BWD_DW = 2
NORM_BWD_DB = 1
RMS_BWD_DX = 6


def _acc(dtype: str) -> str:
    return "float32" if dtype in ("float16", "bfloat16") or dtype.startswith("float8") else dtype


def _stats_shape(x: TensorMeta, normalized: list[int]) -> tuple[int, ...]:
    axis = x.ndim - len(normalized)
    return (*x.shape[:axis], *([1] * len(normalized)))


def _backward_outputs(
    x: TensorMeta, mask: list[bool], dweight: TensorMeta | None, dbias: TensorMeta | None
) -> tuple[int, list[TensorMeta]]:
    """FLOPs and outputs of a norm backward: dx, dweight, dbias, each where `mask` asks for
    it and (for the parameters) where there is one."""
    flops, outs = 0, []
    for wanted, out, per_element in (
        (mask[0], TensorMeta(x.shape, x.dtype), NORM_BWD_DX),
        (mask[1], dweight, NORM_BWD_DW),
        (mask[2], dbias, NORM_BWD_DB),
    ):
        if wanted and out is not None:
            flops += x.numel * per_element
            outs.append(out)
    return flops, outs


def _affine(*tensors: TensorMeta | None) -> int:
    return AFFINE * sum(1 for t in tensors if t is not None)


def _mask(call: OpCall, pos: int, n: int) -> list[bool]:
    value = call.arg(pos)
    if isinstance(value, (list, tuple)) and len(value) >= n:
        return [bool(v) for v in value]
    return [True] * n


@register("aten::native_layer_norm", "aten::layer_norm", family="norm")
def _layer_norm(call: OpCall) -> Cost:
    # (input, normalized_shape, weight?, bias?, eps)
    x, w, b = call.tensor(0), call.tensor(2), call.tensor(3)
    normalized = call.int_list(1, [x.shape[-1]])
    flops = x.numel * (NORM_FWD + _affine(w, b))
    outs = [TensorMeta(x.shape, x.dtype)]
    if call.name == "aten::native_layer_norm":
        stats = TensorMeta(_stats_shape(x, normalized), _acc(x.dtype))
        outs += [stats, stats]
    return simple(call, flops, outs, VECTOR)


@register("aten::native_layer_norm_backward", family="norm")
def _layer_norm_backward(call: OpCall) -> Cost:
    # (grad_out, input, normalized_shape, mean, rstd, weight?, bias?, output_mask)
    # the bias is passed only for its shape: not read
    x, w, b = call.tensor(1), call.tensor(5), call.tensor(6)
    mask = _mask(call, 7, 3)
    flops, outs = _backward_outputs(
        x,
        mask,
        TensorMeta(w.shape, w.dtype) if w is not None else None,
        TensorMeta(b.shape, b.dtype) if b is not None else None,
    )
    reads = distinct_bytes(
        t for i, t in enumerate(call.inputs) if i != 6 and isinstance(t, TensorMeta)
    )
    return read_write(flops, reads, out_bytes(call, outs), VECTOR)


@register("aten::_fused_rms_norm", "aten::rms_norm", family="norm")
def _rms_norm(call: OpCall) -> Cost:
    # (input, normalized_shape, weight?, eps?)
    x, w = call.tensor(0), call.tensor(2)
    normalized = call.int_list(1, [x.shape[-1]])
    flops = x.numel * (RMS_FWD + _affine(w))
    outs = [TensorMeta(x.shape, x.dtype)]
    if call.name == "aten::_fused_rms_norm":
        outs.append(TensorMeta(_stats_shape(x, normalized), _acc(x.dtype)))
    return simple(call, flops, outs, VECTOR)


@register("aten::_fused_rms_norm_backward", family="norm")
def _rms_norm_backward(call: OpCall) -> Cost:
    # (grad_out, input, normalized_shape, rstd, weight?, output_mask)
    x, w = call.tensor(1), call.tensor(4)
    mask = _mask(call, 5, 2)
    flops, outs = 0, []
    if mask[0]:
        flops += x.numel * RMS_BWD_DX
        outs.append(TensorMeta(x.shape, x.dtype))
    if mask[1] and w is not None:
        flops += x.numel * NORM_BWD_DW
        outs.append(TensorMeta(w.shape, w.dtype))
    return simple(call, flops, outs, VECTOR)


@register("aten::native_group_norm", "aten::group_norm", family="norm")
def _group_norm(call: OpCall) -> Cost:
    # native: (input, weight?, bias?, N, C, HxW, group, eps); composite: (input, group, w, b, ...)
    x = call.tensor(0)
    if call.name == "aten::group_norm":
        w, b, groups = call.tensor(2), call.tensor(3), call.arg(1, 1)
    else:
        w, b, groups = call.tensor(1), call.tensor(2), call.arg(6, 1)
    flops = x.numel * (NORM_FWD + _affine(w, b))
    outs = [TensorMeta(x.shape, x.dtype)]
    if call.name == "aten::native_group_norm":
        stats = TensorMeta((x.shape[0], int(groups)), _acc(x.dtype))
        outs += [stats, stats]
    return simple(call, flops, outs, VECTOR)


@register("aten::native_group_norm_backward", family="norm")
def _group_norm_backward(call: OpCall) -> Cost:
    # (grad_out, input, mean, rstd, weight?, N, C, HxW, group, output_mask)
    x, w = call.tensor(1), call.tensor(4)
    mask = _mask(call, 9, 3)
    c = x.shape[1] if x.ndim > 1 else 1
    per_channel = TensorMeta((c,), w.dtype if w else x.dtype)
    flops, outs = _backward_outputs(x, mask, per_channel, per_channel)
    return simple(call, flops, outs, VECTOR)


# op -> (weight, bias, running_mean, running_var, training) positions; training may be a
# constant for ops that always update.
_BN = {
    "aten::native_batch_norm": (1, 2, 3, 4, 5),
    "aten::batch_norm": (1, 2, 3, 4, 5),
    "aten::_batch_norm_impl_index": (1, 2, 3, 4, 5),
    "aten::cudnn_batch_norm": (1, 2, 3, 4, 5),
    "aten::miopen_batch_norm": (1, 2, 3, 4, 5),
    "aten::_native_batch_norm_legit": (1, 2, 3, 4, 5),
    "aten::_native_batch_norm_legit_no_training": (1, 2, 3, 4, False),
    "aten::_batch_norm_with_update": (1, 2, 3, 4, True),
    "aten::_batch_norm_no_update": (1, 2, 3, 4, False),
}


@register(*_BN, family="norm")
def _batch_norm(call: OpCall) -> Cost:
    x = call.tensor(0)
    w_i, b_i, rm_i, rv_i, t_i = _BN[call.name]
    w, b, rm, rv = (call.tensor(i) for i in (w_i, b_i, rm_i, rv_i))
    if call.name == "aten::_native_batch_norm_legit" and not isinstance(call.arg(3), TensorMeta):
        rm = rv = None  # the no-stats overload: (input, weight, bias, training, momentum, eps)
        t_i = 3
    training = t_i if isinstance(t_i, bool) else bool(call.arg(t_i, True))
    c = x.shape[1] if x.ndim > 1 else x.shape[0]
    acc = _acc(x.dtype)
    if training or rm is None:
        flops = x.numel * (NORM_FWD + _affine(w, b))
    else:
        flops = x.numel * (BN_EVAL_FWD + _affine(w, b))
    outs = [TensorMeta(x.shape, x.dtype)]
    if call.name not in ("aten::batch_norm",):
        stat = TensorMeta((c,) if training else (0,), acc)
        outs += [stat, stat]
    if training and rm is not None and rv is not None:
        outs += [rm, rv]  # running stats rewritten in place
    if call.outputs is not None:  # live: real outputs plus in-place running-stat updates
        inplace = [rm, rv] if training and rm is not None and rv is not None else []
        written = sum(o.nbytes for o in call.outputs) + sum(t.nbytes for t in inplace)
    else:
        written = sum(o.nbytes for o in outs)
    return read_write(flops, call.read_bytes(), written, VECTOR)


@register(
    "aten::native_batch_norm_backward",
    "aten::cudnn_batch_norm_backward",
    "aten::miopen_batch_norm_backward",
    "aten::batch_norm_backward",
    family="norm",
)
def _batch_norm_backward(call: OpCall) -> Cost:
    # native: (grad_out, input, weight, running_mean, running_var, save_mean, save_invstd,
    #          train, eps, output_mask); cudnn/miopen: (input, grad_output, weight, ...)
    x = (
        call.tensor(1)
        if call.name in ("aten::native_batch_norm_backward", "aten::batch_norm_backward")
        else call.tensor(0)
    )
    w = call.tensor(2)
    mask = _mask(call, 9, 3) if call.name != "aten::cudnn_batch_norm_backward" else [True] * 3
    c = x.shape[1] if x.ndim > 1 else x.shape[0]
    per_channel = TensorMeta((c,), w.dtype if w else x.dtype)
    flops, outs = _backward_outputs(x, mask, per_channel, per_channel)
    return simple(call, flops, outs, VECTOR)
