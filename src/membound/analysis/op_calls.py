"""An op call that ran kernels, as the analysis keeps it: `OpCall`, and `OpCalls`, the
column store `analysis.ops.join_calls` returns (a big trace's calls held as arrays, made
into objects only as they are read), with the per-call helpers the rules share
(`call_column`, `value_codes`, `first_input_bytes`, `storage_dtype`)."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from membound.dtypes import itemsize, trace_dtype


@dataclass(slots=True)  # made by the million when a big trace's `OpCalls` are iterated
class OpCall:
    """One op call that ran kernels: the unit the chain and dtype rules look at."""

    cpu_index: int
    name: str
    tid: int
    first_kernel_us: float
    last_kernel_end_us: float
    device_us: float
    kernels: int
    flops: float
    bytes: float
    compute: str | None
    family: str
    known: bool
    dtypes: tuple[str, ...] = field(default_factory=tuple)
    dims: Any = None
    #: dtype of its largest tensor input: what its bytes are stored in (an fp32 mean/rstd
    #: statistic next to bf16 activations does not make an op fp32)
    storage_dtype: str | None = None
    #: True when one of its kernels' names says tensor cores (tf32/hmma/TensorOp/...), False
    #: when one says fp32 CUDA-core GEMM (sgemm/simt/ffma) and none says tensor cores
    tensor_cores: bool | None = None
    #: `first_input_bytes` of it, found once per interned shape (None: not computed)
    first_input_bytes: float | None = None
    #: autograd sequence number of the op or of its nearest enclosing op that has one (-1:
    #: none): a forward op and the backward node it recorded share it (`trace.cpu.seq`)
    seq: int = -1
    #: the call runs inside a backward node (`autograd::engine::evaluate_function: ...`)
    backward: bool = False
    #: bytes read, of `bytes` (`cost.Cost.read_bytes`; NaN: the split is unknown): the HBM
    #: roof follows the share read (`roofline.hbm_rate`)
    read_bytes: float = math.nan
    #: bytes of the largest argument the call reads (`cost.Cost.largest_read`; NaN: unknown):
    #: reads that fit in L2 may come from it (`roofline.call_memory_roof`)
    largest_read: float = math.nan


class OpCalls(Sequence):
    """`join_calls`' op calls: a read-only sequence of `OpCall` that holds each field as an
    array, in call order (`columns`). Code reading every call (`op_rows`, the memory rules)
    takes the arrays through `call_column`; indexing or iterating makes the `OpCall` objects
    as they are asked for, so a big trace never holds millions of them at once (1.8M calls
    held ~0.6 GB as objects, against ~0.2 GB as arrays)."""

    __slots__ = ("columns", "_n")

    def __init__(self, columns: dict[str, np.ndarray]):
        self.columns = columns
        self._n = len(columns[OPCALL_FIELDS[0]])

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return OpCalls({f: c[i] for f, c in self.columns.items()})
        i = operator.index(i)
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("op call index out of range")
        # a one-element slice's tolist gives the Python value the whole column's would
        return OpCall(*(self.columns[f][i : i + 1].tolist()[0] for f in OPCALL_FIELDS))

    def __iter__(self):
        cols = [self.columns[f] for f in OPCALL_FIELDS]
        for lo in range(0, self._n, _ITER_CHUNK):
            yield from map(OpCall, *(c[lo : lo + _ITER_CHUNK].tolist() for c in cols))

    def __repr__(self) -> str:
        return f"OpCalls({self._n} calls)"


#: calls made into objects at a time when iterating `OpCalls`
_ITER_CHUNK = 1 << 14

#: dtypes of the `OpCall` fields that are numbers (the rest are Python objects)
_NUMBER_FIELDS = {
    "cpu_index": np.int64, "tid": np.int64, "first_kernel_us": np.float64,
    "last_kernel_end_us": np.float64, "device_us": np.float64, "kernels": np.int64,
    "flops": np.float64, "bytes": np.float64, "known": bool, "seq": np.int64, "backward": bool,
    "read_bytes": np.float64, "largest_read": np.float64,
}  # fmt: skip


def call_column(calls, field: str) -> np.ndarray:
    """Field `field` of every call, in order, as an array: the one `join_calls` kept
    (`OpCalls.columns`), else read from the objects (numbers typed, the rest objects)."""
    columns = getattr(calls, "columns", None)
    if columns is not None and len(columns[field]) == len(calls):
        return columns[field]
    values = list(map(operator.attrgetter(field), calls))
    kind = _NUMBER_FIELDS.get(field)
    return np.array(values, dtype=kind) if kind is not None else object_array(values)


#: OpCall's fields in the order its constructor takes them
OPCALL_FIELDS = tuple(OpCall.__dataclass_fields__)


def value_codes(values) -> tuple[np.ndarray, list]:
    """Each of `values`' (a list or an object array) index among the distinct values (in
    order of first appearance), and those distinct values."""
    distinct = list(dict.fromkeys(values))
    index = {v: i for i, v in enumerate(distinct)}
    return np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values)), distinct


def object_array(values: list) -> np.ndarray:
    """A 1-d object array of `values` (tuples and lists stay elements, not rows)."""
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def first_input_bytes(dims: Any, storage: str | None, dtypes: tuple[str, ...]) -> float:
    """Bytes of an op's first tensor input, in its storage dtype (0 without a shape): what
    the chain rules compare and count as an intermediate."""
    dims = dims or []
    first = dims[0] if dims and isinstance(dims[0], list) else None
    if not first or not all(isinstance(d, int) for d in first):
        return 0.0
    n = 1
    for d in first:
        n *= d
    dtype = storage or (dtypes[0] if dtypes else "float")
    return float(n * itemsize(trace_dtype(dtype)))


def storage_dtype(dims: Any, types: Any) -> str | None:
    """Dtype of the largest tensor input (by element count; the first on a tie)."""
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    best, best_n = None, -1
    for d, t in zip(dims, types, strict=False):
        if not t or not isinstance(d, list) or not d or not all(isinstance(x, int) for x in d):
            continue
        n = 1
        for x in d:
            n *= x
        if n > best_n:
            best, best_n = str(t), n
    return best
