"""Reductions: sum, mean, var, std, amax/amin, max/min, norm, prod, any/all, argmax ...

FLOPs per *input* element: 1 for sum / prod / amax / amin / max / min / any / all /
argmax / argmin / count_nonzero; mean 1 (+1 per output for the division); var / std 3
(subtract the mean, square-accumulate = 2) with std +1 per output (sqrt); linalg norm 2
(square-accumulate); logsumexp 4 (max, subtract, exp, add).
Bytes: input once, output once. The reduced dims come from the `dim` argument (a trace
records it as "[-1]" / "1"; none given = all dims); keepdim changes no byte count.
Output dtype: int64 for sum/prod of integers and bools, the `dtype` argument when given,
else the input dtype (argmax/argmin: int64; max/min with dim also return int64 indices).
"""

from __future__ import annotations

from membound.cost.call import OpCall, TensorMeta
from membound.cost.formulas.pointwise import pointwise_cost
from membound.cost.registry import VECTOR, Cost, register, simple
from membound.dtypes import as_dtype

PER_INPUT = {
    "sum": 1,
    "nansum": 1,
    "prod": 1,
    "amax": 1,
    "amin": 1,
    "max": 1,
    "min": 1,
    "any": 1,
    "all": 1,
    "argmax": 1,
    "argmin": 1,
    "count_nonzero": 1,
    "mean": 1,
    "nanmean": 1,
    "var": 3,
    "std": 3,
    "var_mean": 3,
    "std_mean": 3,
    "linalg_vector_norm": 2,
    "norm": 2,
    "logsumexp": 4,
}
PER_OUTPUT = {"mean": 1, "nanmean": 1, "std": 1, "std_mean": 2, "var_mean": 1}
_INT_ACC = {"sum", "nansum", "prod"}
_INT = {"int8", "uint8", "int16", "int32", "int64", "bool"}
_ARG_DTYPE = {"sum": 3, "nansum": 3, "mean": 3, "nanmean": 3, "prod": 3, "linalg_vector_norm": 4}


def _reduced_dims(call: OpCall, base: str, ndim: int) -> list[int] | None:
    pos = 2 if base == "linalg_vector_norm" else 1
    value = call.arg(pos)
    if base == "norm" and isinstance(value, (int, float)) and not isinstance(value, bool):
        value = call.arg(2)  # norm(self, p, dim, keepdim)
    if isinstance(value, bool) or value is None or isinstance(value, (float, str)):
        return None
    dims = [value] if isinstance(value, int) else list(value)
    if not dims or not all(isinstance(d, int) for d in dims):
        return None
    if any(not -max(ndim, 1) <= d < max(ndim, 1) for d in dims):
        return None  # not a dim: a ScalarType code recorded in the dim slot (sum(x, dtype))
    return [d % ndim if ndim else 0 for d in dims]


@register(*(f"aten::{op}" for op in PER_INPUT), family="reduction")
def _reduction(call: OpCall) -> Cost:
    base = call.name.split("::")[-1]
    if base in ("max", "min") and isinstance(call.arg(1), TensorMeta):
        # max/min(self, other): the elementwise overload (as maximum/minimum), not a reduction
        # (HF T5's relative position buckets: torch.min of two int64 tensors)
        return pointwise_cost(call, 1)
    x = call.tensor(0)
    dims = _reduced_dims(call, base, x.ndim)
    if dims is None:
        out_shape: tuple[int, ...] = ()
    else:
        out_shape = tuple(s for i, s in enumerate(x.shape) if i not in dims)
    if base in ("argmax", "argmin"):
        dtype = "int64"
    else:
        pos = _ARG_DTYPE.get(base)
        given = as_dtype(call.arg(pos)) if pos is not None and dims is not None else None
        if pos is not None and dims is None and base in ("sum", "prod", "mean"):
            given = as_dtype(call.arg(1))  # sum(self, dtype) overload
        dtype = given or ("int64" if base in _INT_ACC and x.dtype in _INT else x.dtype)
    out = TensorMeta(out_shape, dtype)
    outs = [out]
    if base in ("max", "min") and dims is not None:
        outs.append(TensorMeta(out_shape, "int64"))
    if base in ("var_mean", "std_mean"):
        outs.append(out)
    n_out = out.numel
    flops = x.numel * PER_INPUT[base] + n_out * PER_OUTPUT.get(base, 0)
    return simple(call, flops, outs, VECTOR)
