"""membound's own fused residual-add + dropout + LayerNorm/RMSNorm (`membound::add_norm_fwd`,
`membound::add_norm_bwd`: the custom ops of `membound.nn.add_norm_op`, which the eager path
also calls while a profiler records CPU ops, so their kernels are costed from the recorded
arguments).

Forward (x, residual?, pre_bias?, weight?, bias?, dropout_p, is_rms, eps, store_s, s_dtype,
out_dtype): reads every tensor input once; writes y (out_dtype), s (s_dtype) when stored,
rstd and, for LayerNorm, mean (fp32, one per row). FLOPs per element: the norm's (norm.py)
+ 1 per residual add, + 1 per pre-bias add, + 2 for dropout (compare, scale).

Backward (dy, ds?, src, mean, rstd, weight?, seed, dropout_p, is_rms, want_dres,
want_dweight, want_dbias, want_dpre_bias, x_dtype, res_dtype, param_dtype): reads every
tensor input once; writes dx, dresidual where it is a tensor of its own (dropout, or another
dtype), and each wanted parameter gradient. The per-program partial sums of the parameter
gradients (a few rows per SM, fp32) are the kernels' own scratch: left out, as they are
small against the rows.
"""

from __future__ import annotations

from typing import Any

from membound.cost.call import OpCall, TensorMeta
from membound.cost.formulas.norm import (
    AFFINE,
    NORM_BWD_DB,
    NORM_BWD_DW,
    NORM_BWD_DX,
    NORM_FWD,
    RMS_BWD_DX,
    RMS_FWD,
)
from membound.cost.registry import VECTOR, Cost, fallback, register, simple
from membound.dtypes import as_dtype, canonical

DROPOUT = 2  # per element: compare the random draw, scale the kept value


def _dtype(value: Any, default: str) -> str:
    """A dtype argument as recorded (ScalarType code, name, torch.dtype live) or `default`."""
    if isinstance(value, (bool, int)) or value is None:
        return as_dtype(value, default) or default
    return canonical(value) or default


def _flag(value: Any, default: bool) -> bool:
    return value if isinstance(value, bool) else default


@register("membound::add_norm_fwd", family="add_norm")
def _add_norm_fwd(call: OpCall) -> Cost:
    x, res, pre_bias, w, b = (call.tensor(i) for i in range(5))
    if x is None or not x.shape:
        return fallback(call)
    p = call.arg(5, 0.0)
    p = float(p) if isinstance(p, (int, float)) and not isinstance(p, bool) else 0.0
    is_rms = _flag(call.arg(6), False)
    s_dtype = _dtype(call.arg(9), res.dtype if res is not None else x.dtype)
    out_dtype = _dtype(call.arg(10), x.dtype)
    default_store = res is not None or pre_bias is not None or p > 0.0 or s_dtype != x.dtype
    store_s = _flag(call.arg(8), default_store)
    rows = x.numel // x.shape[-1] if x.shape[-1] else 0
    per = (RMS_FWD if is_rms else NORM_FWD) + AFFINE * sum(t is not None for t in (w, b))
    per += (res is not None) + (pre_bias is not None) + (DROPOUT if p > 0.0 else 0)
    outs = [TensorMeta(x.shape, out_dtype)]
    if store_s:
        outs.append(TensorMeta(x.shape, s_dtype))
    outs += [TensorMeta((rows,), "float32")] * (1 if is_rms else 2)
    return simple(call, x.numel * per, outs, VECTOR)


@register("membound::add_norm_bwd", family="add_norm")
def _add_norm_bwd(call: OpCall) -> Cost:
    dy = call.tensor(0)
    if dy is None or not dy.shape:
        return fallback(call)
    p = call.arg(7, 0.0)
    p = float(p) if isinstance(p, (int, float)) and not isinstance(p, bool) else 0.0
    is_rms = _flag(call.arg(8), False)
    want = [_flag(call.arg(i), True) for i in (9, 10, 11, 12)]  # dres, dw, db, dpre_bias
    x_dtype = _dtype(call.arg(13), dy.dtype)
    res_dtype = _dtype(call.arg(14), x_dtype)
    param_dtype = _dtype(call.arg(15), "float32")
    n = dy.shape[-1]
    per = RMS_BWD_DX if is_rms else NORM_BWD_DX
    per += NORM_BWD_DW * want[1] + NORM_BWD_DB * (want[2] + want[3])
    per += DROPOUT if p > 0.0 else 0
    outs = [TensorMeta(dy.shape, x_dtype)]
    if want[0] and (p > 0.0 or res_dtype != x_dtype):
        outs.append(TensorMeta(dy.shape, res_dtype))
    outs += [TensorMeta((n,), param_dtype) for wanted in want[1:] if wanted]
    return simple(call, dy.numel * per, outs, VECTOR)
