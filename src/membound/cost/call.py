"""The normalized description of one op call that every cost formula reads.

Both entry points build an `OpCall`: the live counter from real tensors (outputs known),
the post-hoc path from a profiler trace's recorded arguments (outputs unknown, `None`).
Arguments keep the op schema's order, so a formula reads `call.arg(i)` the same way in
both cases. Tensors become `TensorMeta`; a TensorList becomes a list of `TensorMeta`;
everything else is a plain Python value (int, float, bool, list of ints, dtype name, None).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from membound.dtypes import ITEMSIZE, as_dtype, itemsize, result_type


def numel(shape: Sequence[int]) -> int:
    return math.prod(int(s) for s in shape)


def storage_extent(shape: Sequence[int], strides: Sequence[int] | None) -> int:
    """Elements a (possibly broadcast) view really covers: a stride-0 dim repeats memory."""
    n = numel(shape)
    if not strides or len(strides) != len(shape) or n == 0:
        return n
    span = 1 + sum((int(s) - 1) * abs(int(st)) for s, st in zip(shape, strides, strict=True))
    return min(n, span)


@dataclass(frozen=True)
class TensorMeta:
    """Shape and dtype of one tensor argument; `extent` = elements actually stored."""

    shape: tuple[int, ...]
    dtype: str = "float32"
    extent: int | None = None
    # identity of the live tensor, so one tensor passed twice is read once; None post hoc
    ident: int | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        # a dense tensor stores all its elements: make equal tensors compare equal
        if self.extent is None:
            object.__setattr__(self, "extent", numel(self.shape))

    @property
    def numel(self) -> int:
        return numel(self.shape)

    @property
    def itemsize(self) -> int:
        return itemsize(self.dtype)

    @property
    def nbytes(self) -> int:
        return (self.numel if self.extent is None else self.extent) * self.itemsize

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @classmethod
    def from_tensor(cls, t: Any) -> TensorMeta:
        shape = tuple(int(s) for s in t.shape)
        try:
            strides = tuple(int(s) for s in t.stride())
        except RuntimeError:  # sparse / nested layouts have no strides
            strides = None
        return cls(shape, as_dtype(t.dtype, "float32"), storage_extent(shape, strides), id(t))


class TensorList(list):
    """A TensorList argument rebuilt from a trace: its tensors as `TensorMeta`, in order.

    The profiler records each tensor's shape and strides but no dtype for a list, so unless
    the caller knew it (`trace_args.parse_args`' `list_dtypes`, e.g. from the kernel the op
    launched) `dtype_known` is False and the elements carry an assumed dtype, which a formula
    must not pass off as exact. `readable` is False where the recorded shapes could not be
    read (the list is then empty): the op cannot be costed. A live TensorList is a plain
    list of the real tensors' metas."""

    def __init__(
        self, items: Iterable[Any] = (), *, dtype_known: bool = True, readable: bool = True
    ):
        super().__init__(items)
        self.dtype_known = dtype_known
        self.readable = readable


def tensor_metas(items: Iterable[Any]) -> list[TensorMeta]:
    """Flatten TensorMeta and lists of TensorMeta out of an argument list."""
    out: list[TensorMeta] = []
    for item in items:
        if isinstance(item, TensorMeta):
            out.append(item)
        elif isinstance(item, (list, tuple)):
            out.extend(x for x in item if isinstance(x, TensorMeta))
    return out


def distinct_bytes(metas: Iterable[TensorMeta]) -> int:
    """Bytes of each distinct tensor once (live tensors are deduplicated by identity)."""
    seen: set[int] = set()
    total = 0
    for m in metas:
        if m.ident is not None:
            if m.ident in seen:
                continue
            seen.add(m.ident)
        total += m.nbytes
    return total


@dataclass
class OpCall:
    """One op call: name ("aten::add"), schema-ordered inputs, outputs when known.

    `arg_names`: the name of each input, in the same order, where the caller knows them
    (an inductor kernel's launch parameters, `in_ptr0` / `out_ptr0` / `xnumel`, read from its
    generated source: `trace.kernel_args`); None for an aten op, whose schema a formula
    knows already. They tell a formula which recorded tensors a kernel reads and which it
    writes, which a trace alone does not."""

    name: str
    inputs: list[Any]
    outputs: list[TensorMeta] | None = None
    arg_names: tuple[str, ...] | None = None

    @property
    def live(self) -> bool:
        return self.outputs is not None

    def arg(self, i: int, default: Any = None) -> Any:
        if i < len(self.inputs) and self.inputs[i] is not None:
            return self.inputs[i]
        return default

    def tensor(self, i: int) -> TensorMeta | None:
        value = self.arg(i)
        return value if isinstance(value, TensorMeta) else None

    def tensors(self) -> list[TensorMeta]:
        return tensor_metas(self.inputs)

    def read_bytes(self) -> int:
        return distinct_bytes(self.tensors())

    def int_list(self, i: int, default: list[int] | None = None) -> list[int] | None:
        value = self.arg(i)
        if isinstance(value, bool):
            return default
        if isinstance(value, int):
            return [value]
        if isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
            return [int(v) for v in value]
        return default


def broadcast(*shapes: Sequence[int]) -> tuple[int, ...]:
    """Broadcast result shape (numpy rules)."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, d in enumerate(s, start=ndim - len(s)):
            if d != 1:
                out[i] = int(d)
    return tuple(out)


def promote(items: Sequence[Any]) -> str:
    """Result dtype of a pointwise op over tensors and Python scalars (torch rules)."""
    key: list[Any] = []
    for item in items:
        if isinstance(item, TensorMeta):
            key.append((item.dtype, item.ndim == 0))
        elif isinstance(item, (bool, int, float, complex)):
            key.append(type(item))
    return _promote(tuple(key))


@functools.lru_cache(maxsize=1024)
def _promote(key: tuple) -> str:
    """torch's type promotion (`membound.dtypes.result_type`: no torch import)."""
    return result_type(
        [
            (k[0] if k[0] in ITEMSIZE else "float32", k[1]) if isinstance(k, tuple) else k
            for k in key
        ]
    )
