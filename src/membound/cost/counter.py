"""Live entry point: a dispatch mode that records every aten op a function runs, with cost.

    with CostCounter() as c:
        loss = model(x).sum(); loss.backward()
    c.records   # [OpRecord(name="aten::addmm", cost=Cost(...), input_shapes, dtypes), ...]
    c.by_op()   # {"aten::addmm": OpTotals(calls, flops, bytes), ...}
    c.total     # Cost summed over all records

The mode sees ops below autograd, so composites (linear, layer_norm, dropout) show up as
the aten ops they decompose into (addmm, native_layer_norm, native_dropout) — the same
leaves a profiler trace attributes kernels to. Views and allocations are recorded with a
zero cost (they move no data). Every call goes through the same registry as the post-hoc
path (`cost_of`), with the outputs taken from the real result tensors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from membound.cost.call import OpCall, TensorMeta
from membound.cost.registry import Cost, evaluate, normalize_name
from membound.dtypes import as_dtype


@dataclass(frozen=True)
class OpRecord:
    name: str  # "aten::addmm"
    cost: Cost
    input_shapes: list  # per argument: shape list, list of shape lists, or [] (non-tensor)
    dtypes: list  # per argument: dtype name, list of names, or "" (non-tensor)


@dataclass(frozen=True)
class OpTotals:
    calls: int
    flops: float
    bytes: float


def _convert(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return TensorMeta.from_tensor(value)
    if isinstance(value, torch.dtype):
        return as_dtype(value)
    if isinstance(value, (list, tuple)):
        return [_convert(v) for v in value]
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return int(value) if isinstance(value, torch.SymInt) else value
    if isinstance(value, (torch.device, torch.layout, torch.memory_format)):
        return str(value)
    return value


def schema_args(func: Any, args: tuple, kwargs: dict) -> list[Any]:
    """Arguments in schema order, defaults filled, `out=` buffers left out."""
    values: list[Any] = []
    schema = getattr(func, "_schema", None)
    if schema is None:
        return [*args, *kwargs.values()]
    for i, arg in enumerate(schema.arguments):
        if arg.kwarg_only and arg.alias_info is not None and arg.alias_info.is_write:
            continue  # out= buffer: it is the output, not an input
        if i < len(args) and not arg.kwarg_only:
            values.append(args[i])
        elif arg.name in kwargs:
            values.append(kwargs[arg.name])
        elif arg.has_default_value():
            values.append(arg.default_value)
        else:
            values.append(None)
    return values


def _describe(value: Any) -> tuple[Any, Any]:
    if isinstance(value, TensorMeta):
        return list(value.shape), value.dtype
    if isinstance(value, list) and value and all(isinstance(v, TensorMeta) for v in value):
        return [list(v.shape) for v in value], [v.dtype for v in value]
    return [], ""


class CostCounter(TorchDispatchMode):
    """Records each aten op call with its `Cost` while active."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[OpRecord] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        inputs = [_convert(v) for v in schema_args(func, args, kwargs)]
        flat, _ = tree_flatten(result)
        outputs = [TensorMeta.from_tensor(t) for t in flat if isinstance(t, torch.Tensor)]
        call = OpCall(normalize_name(func.name()), inputs, outputs)
        cost = evaluate(call)  # a formula that fails degrades to the marked fallback
        shapes, dtypes = zip(*(_describe(v) for v in inputs), strict=True) if inputs else ((), ())
        self.records.append(OpRecord(call.name, cost, list(shapes), list(dtypes)))
        return result

    def by_op(self) -> dict[str, OpTotals]:
        """Per op name: number of calls, summed FLOPs and bytes (first-seen order)."""
        acc: dict[str, list[float]] = {}
        for r in self.records:
            entry = acc.setdefault(r.name, [0, 0.0, 0.0])
            entry[0] += 1
            entry[1] += r.cost.flops
            entry[2] += r.cost.bytes
        return {k: OpTotals(int(v[0]), v[1], v[2]) for k, v in acc.items()}

    @property
    def total(self) -> Cost:
        flops = sum(r.cost.flops for r in self.records)
        moved = sum(r.cost.bytes for r in self.records)
        exact = all(r.cost.exact for r in self.records)
        split = [r.cost.read_bytes for r in self.records]
        reads = sum(split) if None not in split else None  # known when each call's is
        return Cost(flops, moved, None, exact, "total", reads)
