"""Post-hoc costs: rebuild an `OpCall` from what a kineto trace records for a CPU op.

With `record_shapes=True` the profiler stores, per argument in schema order:
- "Input Dims": a shape list for a tensor (`[]` for a 0-dim tensor, a scalar or None),
  a list of shape lists for a TensorList;
- "Input type": the tensor's C++ dtype name ("float", "c10::BFloat16", "long int", ...),
  or "Scalar", "ScalarList", "TensorList", "GenericList", "" (None / string / device ...);
- "Concrete Inputs": the value of a scalar argument as text ("0.10000000000000001",
  "-1", "[128]", "True", "" for tensors and None);
- "Input Strides" (recent torch): strides per tensor, used for the real storage extent of
  broadcast (stride-0) inputs.

Outputs are not recorded, so `OpCall.outputs` is None and formulas infer them.
A 0-dim "double" / "long int" / "bool" / complex-double tensor past the first argument
is most often a Python number that aten wrapped (`x * 2.0`, recorded without its value):
it stays a 0-dim TensorMeta (so type promotion treats it as a scalar) but costs 0 bytes,
as the live path's plain Python number does. A genuine 0-dim tensor of those dtypes is off by its
8 bytes, which no roofline will notice.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Mapping, Sequence
from typing import Any

from membound.cost.call import OpCall, TensorMeta, storage_extent
from membound.cost.registry import Cost, evaluate
from membound.dtypes import trace_dtype

# dtypes a wrapped Python number gets (0-dim): treated as scalars post hoc
_WRAPPED_NUMBER = {"float64", "int64", "bool", "complex128"}


def parse_concrete(text: Any) -> Any:
    """One "Concrete Inputs" entry -> Python value ("" -> None, "[1, 2]" -> [1, 2])."""
    if not isinstance(text, str):
        return text
    value = _parse_text(text)
    return list(value) if isinstance(value, tuple) else value


@functools.lru_cache(maxsize=8192)
def _parse_text(text: str) -> Any:
    # cached: traces repeat the same few argument strings; lists come back as tuples
    # (immutable in the cache) and are copied into lists by the caller
    s = text.strip()
    if s in ("", "None"):
        return None
    if s in ("True", "False"):
        return s == "True"
    try:
        value = ast.literal_eval(s)
    except (ValueError, SyntaxError):
        # floats printed like "0." or "1.0000000000000001e-05" parse; anything else
        # (device strings, enum names) stays text
        try:
            return float(s)
        except ValueError:
            return s
    return tuple(value) if isinstance(value, list) else value


def _is_shape(dims: Any) -> bool:
    return isinstance(dims, (list, tuple)) and all(isinstance(d, int) for d in dims)


def parse_args(
    input_shapes: Sequence[Any],
    input_dtypes: Sequence[str],
    concrete_inputs: Sequence[Any] | None = None,
    input_strides: Sequence[Any] | None = None,
) -> list[Any]:
    """Schema-ordered argument values (TensorMeta, list of TensorMeta, scalars, None)."""
    n = max(len(input_shapes), len(input_dtypes))
    args: list[Any] = []
    for i in range(n):
        dims = input_shapes[i] if i < len(input_shapes) else []
        type_name = input_dtypes[i] if i < len(input_dtypes) else ""
        concrete = concrete_inputs[i] if concrete_inputs and i < len(concrete_inputs) else ""
        strides = input_strides[i] if input_strides and i < len(input_strides) else None
        dtype = trace_dtype(type_name or "")
        if dtype is not None and _is_shape(dims):
            shape = tuple(int(d) for d in dims)
            extent = storage_extent(shape, strides if _is_shape(strides) else None)
            if not shape and dtype in _WRAPPED_NUMBER and i > 0:  # aten never wraps `self`
                extent = 0  # most likely a wrapped Python number: no memory traffic
            args.append(TensorMeta(shape, dtype, extent))
        elif type_name == "TensorList" or (
            isinstance(dims, list) and dims and all(_is_shape(d) for d in dims)
        ):
            # element dtypes are not recorded for a TensorList; float32 is assumed
            args.append([TensorMeta(tuple(d), "float32") for d in dims])
        else:
            args.append(parse_concrete(concrete))
    return args


def cost_of(
    op_name: str,
    input_shapes: list,
    input_dtypes: list,
    concrete_inputs: list | None = None,
    input_strides: list | None = None,
) -> Cost:
    """Cost of one op from its name and the trace's recorded inputs (no outputs needed)."""
    args = parse_args(input_shapes, input_dtypes, concrete_inputs, input_strides)
    return evaluate(OpCall(op_name, args, None))


def cost_of_event(op_name: str, args: Mapping[str, Any]) -> Cost:
    """Cost from a trace event's `args` dict ("Input Dims", "Input type", ...)."""
    return cost_of(
        op_name,
        list(args.get("Input Dims") or []),
        list(args.get("Input type") or []),
        args.get("Concrete Inputs"),
        args.get("Input Strides"),
    )
