"""Data movement without arithmetic: views, allocations, fills, copies/casts, concatenation,
embedding and gathers.

- Views and metadata ops (view, reshape, t, transpose, permute, expand, as_strided, slice,
  select, unsqueeze, detach, _unsafe_view, alias, ...) and bare allocations (empty*) move
  no data: 0 FLOPs, 0 bytes, `compute` None. The live counter records them (with that
  zero cost) so its op list mirrors the program.
- Fills and random generators (fill_, zero_, normal_, bernoulli_, zeros, ones, randn...):
  write their output only; 0 FLOPs.
- copy_ reads `src` (its real extent: a broadcast source costs its own size) and writes
  `self`; _to_copy / clone read the input and write the converted output.
- cat / stack: read every input, write the result.
- embedding / index_select / gather: read the indices and only the rows they select
  (at most min(#indices, #rows) rows), write the output. embedding backward reads the
  gradient and indices, writes the full weight gradient (1 add per gradient element).
"""

from __future__ import annotations

import math

from membound.cost.call import OpCall, TensorMeta
from membound.cost.registry import VECTOR, Cost, out_bytes, read_write, register
from membound.dtypes import as_dtype

VIEWS = (
    "view _unsafe_view reshape _reshape_alias t transpose permute expand expand_as "
    "as_strided slice select unsqueeze squeeze detach alias unflatten flatten narrow "
    "split split_with_sizes chunk unbind view_as diagonal unfold movedim moveaxis swapaxes "
    "numpy_T mT lift_fresh resolve_conj resolve_neg view_as_real view_as_complex real imag "
    "t_ transpose_ squeeze_ unsqueeze_ as_strided_ detach_ broadcast_to _conj _neg_view "
    "empty empty_like empty_strided new_empty new_empty_strided resize_ set_ result_type "
    "is_same_size _has_compatible_shallow_copy_type size stride sym_size sym_stride "
    "is_nonzero _local_scalar_dense lift record_stream"
).split()

FILLS_INPLACE = "fill_ zero_ normal_ uniform_ bernoulli_ random_ exponential_ geometric_ log_normal_ cauchy_".split()
FACTORIES = "zeros ones full randn rand randint randperm scalar_tensor".split()
LIKE = "zeros_like ones_like full_like randn_like rand_like randint_like".split()
NEW = "new_zeros new_ones new_full".split()


@register(*VIEWS, family="view")
def _view(call: OpCall) -> Cost:
    return Cost(0.0, 0.0, None, read_bytes=0.0)


def _written(call: OpCall, inferred: list[TensorMeta]) -> Cost:
    return read_write(0, 0, out_bytes(call, inferred), VECTOR)


@register(*FILLS_INPLACE, family="fill")
def _fill_inplace(call: OpCall) -> Cost:
    # only self is written; a tensor fill value (fill_.Tensor) is one element, ignored
    x = call.tensor(0)
    return read_write(0, 0, x.numel * x.itemsize, VECTOR)


@register(*FACTORIES, family="fill")
def _factory(call: OpCall) -> Cost:
    base = call.name.split("::")[-1]
    size_pos = next(
        (i for i, a in enumerate(call.inputs) if isinstance(a, list)),
        None,
    )
    shape = tuple(call.inputs[size_pos]) if size_pos is not None else ()
    if base == "randperm":
        shape = (int(call.arg(0, 0)),)
    dtype_pos = (size_pos or 0) + (2 if base == "full" else 1)
    default = "int64" if base in ("randint", "randperm") else "float32"
    dtype = as_dtype(call.arg(dtype_pos), default) if size_pos is not None else default
    return _written(call, [TensorMeta(shape, dtype)])


@register(*LIKE, family="fill")
def _like(call: OpCall) -> Cost:
    x = call.tensor(0)
    pos = {"full_like": 2, "randint_like": 2}.get(call.name.split("::")[-1], 1)
    return _written(call, [TensorMeta(x.shape, as_dtype(call.arg(pos), x.dtype))])


@register(*NEW, family="fill")
def _new(call: OpCall) -> Cost:
    x = call.tensor(0)
    shape = tuple(call.int_list(1, []))
    pos = 3 if call.name.endswith("new_full") else 2
    return _written(call, [TensorMeta(shape, as_dtype(call.arg(pos), x.dtype))])


@register("aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize", family="copy")
def _copy(call: OpCall) -> Cost:
    # copy_(self, src, non_blocking): read src, write self (self is not read)
    # _copy_from(self=src, dst, non_blocking): read self, write dst
    if call.name == "aten::copy_":
        dst, src = call.tensor(0), call.tensor(1)
    else:
        src, dst = call.tensor(0), call.tensor(1)
    return read_write(0, src.nbytes, dst.numel * dst.itemsize, VECTOR)


@register("aten::_to_copy", "aten::clone", "aten::_to_dtype", family="copy")
def _to_copy(call: OpCall) -> Cost:
    # _to_copy(self, dtype?, layout?, device?, pin_memory?, non_blocking, memory_format?)
    x = call.tensor(0)
    dtype = as_dtype(call.arg(1), x.dtype) if call.name != "aten::clone" else x.dtype
    return read_write(0, x.nbytes, out_bytes(call, [TensorMeta(x.shape, dtype)]), VECTOR)


@register("aten::cat", "aten::concat", "aten::concatenate", "aten::stack", family="copy")
def _cat(call: OpCall) -> Cost:
    parts = [t for t in (call.arg(0) or []) if isinstance(t, TensorMeta)]
    read = sum(t.nbytes for t in parts)
    total = sum(t.numel for t in parts)
    dtype = parts[0].dtype if parts else "float32"
    return read_write(0, read, out_bytes(call, [TensorMeta((total,), dtype)]), VECTOR)


def _rows_read(table: TensorMeta, dim: int, n_index: int) -> int:
    """Bytes of the rows an index selects from `table` along `dim` (each row at most once)."""
    rows = table.shape[dim] if table.ndim else 1
    row_bytes = (table.numel // rows if rows else 0) * table.itemsize
    return min(n_index, rows) * row_bytes


@register("aten::embedding", family="embedding")
def _embedding(call: OpCall) -> Cost:
    # (weight [V, D], indices, padding_idx, scale_grad_by_freq, sparse)
    w, idx = call.tensor(0), call.tensor(1)
    out = TensorMeta((*idx.shape, *w.shape[1:]), w.dtype)
    read = _rows_read(w, 0, idx.numel) + idx.nbytes
    return read_write(0, read, out_bytes(call, [out]), VECTOR)


@register("aten::index_select", family="embedding")
def _index_select(call: OpCall) -> Cost:
    # (self, dim, index)
    x, idx = call.tensor(0), call.tensor(2)
    dim = int(call.arg(1, 0)) % max(x.ndim, 1)
    shape = list(x.shape)
    if shape:
        shape[dim] = idx.numel
    out = TensorMeta(tuple(shape), x.dtype)
    read = _rows_read(x, dim, idx.numel) + idx.nbytes
    return read_write(0, read, out_bytes(call, [out]), VECTOR)


@register("aten::gather", family="embedding")
def _gather(call: OpCall) -> Cost:
    # (self, dim, index, sparse_grad): one element of self per index element
    x, idx = call.tensor(0), call.tensor(2)
    out = TensorMeta(idx.shape, x.dtype)
    read = min(idx.numel, x.numel) * x.itemsize + idx.nbytes
    return read_write(0, read, out_bytes(call, [out]), VECTOR)


@register("aten::embedding_dense_backward", "aten::embedding_backward", family="embedding")
def _embedding_backward(call: OpCall) -> Cost:
    # (grad_output [..., D], indices, num_weights, padding_idx, scale_grad_by_freq)
    gy, idx = call.tensor(0), call.tensor(1)
    num_weights = int(call.arg(2, 0))
    out = TensorMeta((num_weights, gy.shape[-1]), gy.dtype)
    return read_write(gy.numel, gy.nbytes + idx.nbytes, out_bytes(call, [out]), VECTOR)


@register("aten::arange", "aten::linspace", "aten::logspace", family="fill")
def _range(call: OpCall) -> Cost:
    # arange(end, ...) / arange(start, end, step?, ...) / linspace(start, end, steps, ...)
    nums = [a for a in call.inputs[:3] if isinstance(a, (int, float)) and not isinstance(a, bool)]
    base = call.name.split("::")[-1]
    if base != "arange":
        n = int(nums[2]) if len(nums) >= 3 else 0
        dtype = "float32"
    else:
        start, end, step = (
            (0, nums[0], 1) if len(nums) == 1 else (*nums[:2], nums[2] if len(nums) > 2 else 1)
        )
        n = max(0, math.ceil((end - start) / step)) if step else 0
        dtype = "int64" if all(isinstance(v, int) for v in nums) else "float32"
    return _written(call, [TensorMeta((n,), dtype)])
