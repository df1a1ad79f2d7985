"""Row-wise ops: softmax / log_softmax (and backward), dropout, cross-entropy / NLL.

FLOPs per element: softmax 5 and log_softmax 5 (max, subtract, exp, sum, divide / log
subtract); their backward 4 (softmax: y·(dy − Σdy·y) = mul, sum, sub, mul; log_softmax:
dy − exp(y)·Σdy = exp, mul, sub, sum). Dropout forward 2 (random compare, scale-multiply),
backward 2 (mask select, scale). NLL: 1 per row (gather + accumulate), +1 with class
weights. Cross-entropy (the composite) = log_softmax (5/element) + NLL.
Bytes (minimal): softmax reads x, writes y; dropout reads x, writes y and the bool mask
(1 byte/element); dropout backward reads dy and the mask, writes dx.
NLL forward reads only the one log-probability per row it needs (gathered), the targets,
the class weights, and writes the loss (+ total_weight); NLL backward reads dy, targets,
weights and writes the full dx (N×C, mostly zeros). Cross-entropy reads the logits once
+ targets + weights, writes the loss.
"""

from __future__ import annotations

from membound.cost.call import OpCall, TensorMeta
from membound.cost.registry import VECTOR, Cost, read_write, register, simple
from membound.dtypes import as_dtype

SOFTMAX_FWD = 5
SOFTMAX_BWD = 4
DROPOUT_FWD = 2
DROPOUT_BWD = 2
NLL_PER_ROW = 1


@register(
    "aten::_softmax", "aten::softmax", "aten::_log_softmax", "aten::log_softmax", family="softmax"
)
def _softmax(call: OpCall) -> Cost:
    # _softmax(self, dim, half_to_float); softmax(self, dim, dtype?)
    x = call.tensor(0)
    dtype = x.dtype
    if call.name in ("aten::_softmax", "aten::_log_softmax") and call.arg(2) is True:
        dtype = "float32"
    elif call.name in ("aten::softmax", "aten::log_softmax"):
        dtype = as_dtype(call.arg(2), x.dtype)
    return simple(call, x.numel * SOFTMAX_FWD, [TensorMeta(x.shape, dtype)], VECTOR)


@register("aten::_softmax_backward_data", "aten::_log_softmax_backward_data", family="softmax")
def _softmax_backward(call: OpCall) -> Cost:
    # (grad_output, output, dim, input_dtype)
    gy = call.tensor(0)
    dtype = as_dtype(call.arg(3), gy.dtype)
    return simple(call, gy.numel * SOFTMAX_BWD, [TensorMeta(gy.shape, dtype)], VECTOR)


@register("aten::native_dropout", "aten::dropout", "aten::feature_dropout", family="dropout")
def _dropout(call: OpCall) -> Cost:
    # native_dropout(input, p, train?) -> (out, mask); dropout(input, p, train) -> out
    x = call.tensor(0)
    train = call.arg(2, True)
    if train is False:  # identity (the composite returns the input; native copies it)
        outs = [TensorMeta(x.shape, x.dtype)] if call.name == "aten::native_dropout" else []
        return simple(call, 0, outs, VECTOR)
    outs = [TensorMeta(x.shape, x.dtype)]
    if call.name == "aten::native_dropout":
        outs.append(TensorMeta(x.shape, "bool"))
    return simple(call, x.numel * DROPOUT_FWD, outs, VECTOR)


@register("aten::native_dropout_backward", family="dropout")
def _dropout_backward(call: OpCall) -> Cost:
    # (grad_output, mask, scale)
    gy = call.tensor(0)
    return simple(call, gy.numel * DROPOUT_BWD, [TensorMeta(gy.shape, gy.dtype)], VECTOR)


def _loss_shape(target: TensorMeta, reduction: object) -> tuple[int, ...]:
    # reduction: 0 none, 1 mean, 2 sum (int, as the trace records it)
    return target.shape if reduction == 0 else ()


@register(
    "aten::nll_loss_forward",
    "aten::nll_loss",
    "aten::nll_loss_nd",
    "aten::nll_loss2d_forward",
    "aten::nll_loss2d",
    family="loss",
)
def _nll_loss(call: OpCall) -> Cost:
    # (self [N, C, ...] log-probs, target [N, ...], weight?, reduction, ignore_index)
    x, target, weight = call.tensor(0), call.tensor(1), call.tensor(2)
    rows = target.numel
    gathered = rows * x.itemsize  # one log-probability per row is all the loss needs
    # class weights are gathered too: at most one per row
    w_bytes = min(weight.numel, rows) * weight.itemsize if weight is not None else 0
    reduction = call.arg(3, 1)
    outs = [TensorMeta(_loss_shape(target, reduction), x.dtype)]
    if call.name.endswith("_forward"):
        outs.append(TensorMeta((), x.dtype))  # total_weight
    written = sum(o.nbytes for o in (call.outputs if call.outputs is not None else outs))
    flops = rows * (NLL_PER_ROW + (1 if weight is not None else 0))
    return read_write(flops, gathered + target.nbytes + w_bytes, written, VECTOR)


@register("aten::nll_loss_backward", "aten::nll_loss2d_backward", family="loss")
def _nll_loss_backward(call: OpCall) -> Cost:
    # (grad_output, self, target, weight?, reduction, ignore_index, total_weight)
    gy, x, target, weight = call.tensor(0), call.tensor(1), call.tensor(2), call.tensor(3)
    tw = call.tensor(6)
    rows = target.numel
    reads = gy.nbytes + target.nbytes + (tw.nbytes if tw is not None else 0)
    reads += min(weight.numel, rows) * weight.itemsize if weight is not None else 0
    # grad_input is zeroed by its own aten::zero_ (a fill kernel, costed as that op), then
    # this op's kernel writes one element per row: counting the whole [N, C] tensor here put
    # GPT-2's nll_loss_backward at 3987% of the memory roof on the H200 (2026-12-01)
    written = rows * x.itemsize
    flops = rows * (NLL_PER_ROW + (1 if weight is not None else 0))
    return read_write(flops, reads, written, VECTOR)


@register("aten::cross_entropy_loss", family="loss")
def _cross_entropy(call: OpCall) -> Cost:
    # (self [N, C, ...] logits, target, weight?, reduction, ignore_index, label_smoothing)
    x, target, weight = call.tensor(0), call.tensor(1), call.tensor(2)
    soft_target = target.dtype == x.dtype and target.shape == x.shape
    rows = x.numel // (x.shape[1] if x.ndim > 1 else x.numel or 1)
    flops = x.numel * SOFTMAX_FWD + rows * (NLL_PER_ROW + (1 if weight is not None else 0))
    if soft_target:
        flops += 2 * x.numel  # target · log_prob, accumulated
    out_shape = (x.shape[0], *x.shape[2:]) if call.arg(3, 1) == 0 and x.ndim > 1 else ()
    return simple(call, flops, [TensorMeta(out_shape, x.dtype)], VECTOR)
