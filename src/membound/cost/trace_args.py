"""Post-hoc costs: rebuild an `OpCall` from what a kineto trace records for a CPU op.

With `record_shapes=True` the profiler stores, per argument in schema order:
- "Input Dims": a shape list for a tensor (`[]` for a 0-dim tensor, a scalar or None),
  a list of shape lists for a TensorList;
- "Input type": the tensor's C++ dtype name ("float", "c10::BFloat16", "long int", ...),
  or "Scalar", "ScalarList", "TensorList", "GenericList", "" (None / string / device ...);
- "Concrete Inputs": the value of a scalar argument as text ("0.10000000000000001",
  "-1", "[128]", "True", "" for tensors and None);
- "Input Strides" (recent torch): strides per tensor, used for the real storage extent of
  broadcast (stride-0) inputs (a TensorList's: one stride list per tensor).

A TensorList's entry in "Input Dims" is the list of its tensors' shapes
(`[[256, 150528], [256]]`); the profiler records no dtype for its tensors and leaves the shapes
out of a long list (`[]`, as for an empty one). The list becomes a `call.TensorList` whose
elements carry the dtype the caller knows (`list_dtypes`: e.g. the one the kernel the op
launched names, `formulas.foreach.list_dtypes_of`) or else float32, marked assumed
(`dtype_known=False`). Shapes that cannot be read (not a list of shapes) make the list
unreadable, and the op is costed as unknown (`registry.fallback`) instead of failing.

Outputs are not recorded, so `OpCall.outputs` is None and formulas infer them; an `out=`
call's buffers are recorded as its last arguments, and are its outputs instead
(`out_args`).
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

from membound.cost import out_args
from membound.cost.call import OpCall, TensorList, TensorMeta, storage_extent
from membound.cost.registry import Cost, evaluate, fallback, normalize_name
from membound.dtypes import canonical, trace_dtype

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


def _is_size(dims: Any) -> bool:
    """A tensor's recorded shape: non-negative ints (a 0-dim tensor's is empty)."""
    return isinstance(dims, (list, tuple)) and all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims
    )


def _list_dtype(list_dtypes: str | Sequence[str | None] | None, k: int) -> str | None:
    """The dtype the caller gave the `k`-th TensorList argument (None: not known)."""
    if isinstance(list_dtypes, str):
        given = list_dtypes
    elif list_dtypes is not None and k < len(list_dtypes):
        given = list_dtypes[k]
    else:
        return None
    return canonical(given) if given else None


def parse_tensor_list(dims: Any, strides: Any = None, dtype: str | None = None) -> TensorList:
    """A TensorList argument from its recorded shapes and strides: each tensor a TensorMeta
    at its real storage extent, in `dtype` when known, else in float32 marked assumed.
    Shapes that are not a list of shapes give an empty list marked unreadable."""
    known = dtype is not None
    if not isinstance(dims, (list, tuple)) or not all(_is_size(d) for d in dims):
        return TensorList(dtype_known=known, readable=False)
    if not (isinstance(strides, (list, tuple)) and len(strides) == len(dims)):
        strides = [None] * len(dims)
    out = TensorList(dtype_known=known)
    for d, st in zip(dims, strides, strict=True):
        shape = tuple(int(x) for x in d)
        extent = storage_extent(shape, st if _is_shape(st) else None)
        out.append(TensorMeta(shape, dtype or "float32", extent))
    return out


def parse_args(
    input_shapes: Sequence[Any],
    input_dtypes: Sequence[str],
    concrete_inputs: Sequence[Any] | None = None,
    input_strides: Sequence[Any] | None = None,
    list_dtypes: str | Sequence[str | None] | None = None,
) -> list[Any]:
    """Schema-ordered argument values (TensorMeta, TensorList, scalars, None).

    `list_dtypes`: the dtype of the TensorList arguments' tensors where the caller knows it
    (the trace does not record it): one for every list, or one per list in order (None:
    unknown)."""
    n = max(len(input_shapes), len(input_dtypes))
    args: list[Any] = []
    lists = 0
    for i in range(n):
        dims = input_shapes[i] if i < len(input_shapes) else []
        type_name = input_dtypes[i] if i < len(input_dtypes) else ""
        type_name = type_name if isinstance(type_name, str) else ""
        concrete = concrete_inputs[i] if concrete_inputs and i < len(concrete_inputs) else ""
        strides = input_strides[i] if input_strides and i < len(input_strides) else None
        dtype = trace_dtype(type_name)
        if dtype is not None and _is_shape(dims):
            shape = tuple(int(d) for d in dims)
            extent = storage_extent(shape, strides if _is_shape(strides) else None)
            if not shape and dtype in _WRAPPED_NUMBER and i > 0:  # aten never wraps `self`
                extent = 0  # most likely a wrapped Python number: no memory traffic
            args.append(TensorMeta(shape, dtype, extent))
        elif type_name == "TensorList" or (
            isinstance(dims, list) and dims and all(_is_shape(d) for d in dims)
        ):
            args.append(parse_tensor_list(dims, strides, _list_dtype(list_dtypes, lists)))
            lists += 1
        else:
            args.append(parse_concrete(concrete))
    return args


def cost_of(
    op_name: str,
    input_shapes: list,
    input_dtypes: list,
    concrete_inputs: list | None = None,
    input_strides: list | None = None,
    *,
    list_dtypes: str | Sequence[str | None] | None = None,
    arg_names: Sequence[str] | None = None,
) -> Cost:
    """Cost of one op from its name and the trace's recorded inputs (no outputs needed).
    `list_dtypes`: the TensorList arguments' dtypes where known (`parse_args`); `arg_names`:
    the recorded arguments' names where known (an inductor kernel's launch parameters,
    `OpCall.arg_names`), which let its formula count reads and writes apart."""
    args = parse_args(input_shapes, input_dtypes, concrete_inputs, input_strides, list_dtypes)
    names = tuple(str(n) for n in arg_names) if arg_names is not None else None
    outs = None
    if names is None:  # an aten op's `out=` buffers are written, not read (`out_args`)
        args, outs = out_args.split(normalize_name(op_name), args)
    call = OpCall(op_name, args, outs, names)
    if any(isinstance(a, TensorList) and not a.readable for a in args):
        return fallback(call)  # shapes that cannot be read: an unknown op, not a guess
    return evaluate(call)


def _recorded(args: Mapping[str, Any], key: str) -> list:
    """One of an event's argument lists; one recorded as text ("[[2, 3], []]") is read as
    Python literals, and anything that is not a list gives an empty one."""
    value = args.get(key)
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return []
    return list(value) if isinstance(value, (list, tuple)) else []


def cost_of_event(
    op_name: str,
    args: Mapping[str, Any],
    *,
    list_dtypes: str | Sequence[str | None] | None = None,
) -> Cost:
    """Cost from a trace event's `args` dict ("Input Dims", "Input type", ...)."""
    return cost_of(
        op_name,
        _recorded(args, "Input Dims"),
        _recorded(args, "Input type"),
        _recorded(args, "Concrete Inputs") or None,
        _recorded(args, "Input Strides") or None,
        list_dtypes=list_dtypes,
    )
