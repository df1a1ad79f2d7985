"""The `_foreach_*` family: one pointwise op (or a norm) over every tensor of TensorLists.

torch's optimizers (SGD, Adam(W) with foreach=True, the default on CUDA) and
`clip_grad_norm_` make one `_foreach_*` call per step over all parameters; its CUDA fast
path launches `multi_tensor_apply_kernel`s that visit every tensor of the lists.

- Arguments: the op's input lists are its first run of TensorList arguments (`self`, then
  `other` / `tensor1, tensor2` / `tensors1, weights` / `src`), at most as many as the op
  takes; a later list is an `out=` buffer (the `.out` overloads). Scalars, ScalarLists and
  a Tensor scalar (`_foreach_mul_.Tensor`'s `other`, `_foreach_addcmul_.Tensor`'s
  `scalars`) may follow; such a tensor is read once.
- Bytes (minimal): every input tensor read once, at its real storage extent (a broadcast,
  stride-0 element costs what it stores), in its storage dtype. In-place ops
  (`_foreach_add_`) write `self` (so `self` is read and written); out-of-place ones write
  one new tensor per element of `self`: the broadcast of that element's inputs, in torch's
  promoted dtype (an `out=` list's recorded shapes where given). `_foreach_norm`,
  `_foreach_powsum` and `_foreach_max` write one scalar per tensor; `_foreach_zero_` only
  writes `self`; `_foreach_copy_` reads `src` and writes `self` (not read).
- FLOPs per output element: the pointwise formulas' count for the op
  (`pointwise.FLOPS_PER_ELEMENT`): add/sub/mul/div/maximum/clamp_min/pow/neg/sqrt... 1 (an
  `alpha` fused, as for `aten::add`), sigmoid 4, addcmul/addcdiv 3 (value·t1·t2 + self, the
  value multiply counted), lerp 3 (self + weight·(end − self)). The norm and powsum count 2
  per input element (square or abs, accumulate: `reduction`'s linalg_vector_norm), max 1;
  zero, copy and clone 0.
- Dtypes: a trace records none for a TensorList (`trace_args`), so unless the caller gave
  the lists' dtypes the tensors are taken as float32 and the cost says so: `exact=False`,
  `assumed_dtype="float32"` (a roofline leaves such a cost unplaced, as an unknown op's).
  The dtype is stated by the kernel the op launched: the fast path runs only on lists of
  one dtype, and its functor names that storage type as its first template argument
  (`multi_tensor_apply_kernel<TensorListMetadata<2>, BinaryOpListAlphaFunctor<float, 2, 2,
  0>, std::plus<float>, float>`; `CopyFunctor<dst, src, ...>` names both of a copy's).
  `list_dtypes_of(op_name, kernel_names)` reads it for `cost_of(..., list_dtypes=...)`.
  Live, the real tensors' dtypes are known and the cost is exact.
- A trace's list recorded empty (`[]`: the profiler leaves a long list's shapes out, and an
  empty list looks the same) cannot be costed: the op is costed as unknown
  (`registry.fallback`), as are lists of unequal lengths. Live, an empty list costs 0.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

from membound.cost.call import OpCall, TensorList, TensorMeta, broadcast, promote
from membound.cost.formulas.pointwise import FLOPS_PER_ELEMENT
from membound.cost.registry import VECTOR, Cost, distinct_bytes, fallback, register
from membound.dtypes import as_dtype, canonical

#: the dtype `trace_args` gives a TensorList's tensors when none is known
ASSUMED = "float32"

#: binary ops: (self, other list | scalar | scalar list | tensor)
BINARY = "add sub mul div clamp_min clamp_max maximum minimum pow".split()
#: unary ops (the foreach ops whose pointwise count membound knows)
UNARY = (
    "abs acos asin atan ceil cos cosh erf erfc exp expm1 floor frac log log10 log1p log2 neg "
    "reciprocal round rsqrt sigmoid sign sin sinh sqrt tan tanh trunc"
).split()
#: ternary ops: (self, tensor1, tensor2 | weights list, ...)
TERNARY = ["addcmul", "addcdiv", "lerp"]
#: reductions writing one scalar per tensor: FLOPs per input element
REDUCE = {"norm": 2, "powsum": 2, "max": 1}
#: ops that move data only, with their input lists: copy(self, src), clone(self), zero(self)
DATA_ONLY = {"copy": 2, "clone": 1, "zero": 1}

#: input lists an op takes at most (a later list is an out= buffer)
MAX_LISTS = {
    **dict.fromkeys(BINARY, 2),
    **dict.fromkeys(UNARY + list(REDUCE), 1),
    **dict.fromkeys(TERNARY, 3),
    **DATA_ONLY,
}

#: position of `dtype` among _foreach_norm / _foreach_powsum's arguments (self, ord, dtype)
_NORM_DTYPE = 2


def _base(name: str) -> str:
    """ "aten::_foreach_add_" -> "add" (in place or not is `_inplace`)."""
    return name.split("::")[-1].removeprefix("_foreach_").rstrip("_")


def _inplace(name: str) -> bool:
    return name.endswith("_")


def _split(call: OpCall) -> tuple[list[list[TensorMeta]], list[list[TensorMeta]]]:
    """(input lists, out= lists): the first run of list arguments, at most the op's count;
    any list after them is an out= buffer."""
    limit = MAX_LISTS.get(_base(call.name), 1)
    ins: list[list[TensorMeta]] = []
    outs: list[list[TensorMeta]] = []
    run_over = False
    for a in call.inputs:
        if _is_list(a):
            (outs if run_over or len(ins) >= limit else ins).append(a)
        elif ins:
            run_over = True
    return ins, outs


def _is_list(value) -> bool:
    return isinstance(value, list) and all(isinstance(t, TensorMeta) for t in value)


def _dtype_known(lists: Iterable[list]) -> bool:
    return all(not isinstance(x, TensorList) or x.dtype_known for x in lists)


def _uncostable(call: OpCall, ins: list[list[TensorMeta]], outs: list[list[TensorMeta]]) -> bool:
    if not ins or any(len(x) != len(ins[0]) for x in ins + outs):
        return True
    # a trace's empty list: long lists are recorded without shapes, so nothing is known
    return not call.live and not ins[0]


def _scalar_operand(call: OpCall):
    """The op's non-list operand for type promotion: a Tensor scalar or a Python number."""
    for a in call.inputs:
        if isinstance(a, TensorMeta):
            return a
        if isinstance(a, (bool, int, float, complex)):
            return a
    return None


def _dense_bytes(tensors) -> float:
    """Bytes of `tensors` written in full (dense: every element once)."""
    return float(sum(t.numel * t.itemsize for t in tensors if isinstance(t, TensorMeta)))


def _written(call: OpCall, given: list[TensorMeta], inferred: list[TensorMeta]) -> float:
    """Bytes of the new tensors: the real outputs live, an out= list's shapes where recorded,
    else the formula's inferred ones (all dense)."""
    return _dense_bytes(call.outputs if call.outputs else (given or inferred))


def _finish(flops: float, read: float, written: float, lists: Iterable[list]) -> Cost:
    """The cost; inexact, naming the dtype assumed, where a list's dtype was not known."""
    cost = Cost(float(flops), float(read + written), VECTOR, read_bytes=float(read))
    if _dtype_known(lists):
        return cost
    return dataclasses.replace(cost, exact=False, assumed_dtype=ASSUMED)


def _reads(call: OpCall, ins: list[list[TensorMeta]]) -> float:
    """Every input tensor once: the lists' elements and any tensor argument."""
    extra = [a for a in call.inputs if isinstance(a, TensorMeta)]
    return float(distinct_bytes([t for x in ins for t in x] + extra))


def _pointwise(call: OpCall, per_element: int) -> Cost:
    ins, outs = _split(call)
    if _uncostable(call, ins, outs):
        return fallback(call)
    self_ = ins[0]
    scalar = _scalar_operand(call)
    results = []
    for i, t in enumerate(self_):
        operands = [x[i] for x in ins]
        shape = broadcast(*(o.shape for o in operands))
        dtype = promote([operands[0], operands[1] if len(operands) > 1 else scalar])
        results.append(TensorMeta(shape, dtype if dtype else t.dtype))
    flops = per_element * sum(r.numel for r in results)
    read = _reads(call, ins)
    if _inplace(call.name):
        written = _dense_bytes(self_)
    else:
        written = _written(call, [t for x in outs for t in x], results)
    return _finish(flops, read, written, ins + outs)


def _make(per_element: int):
    def formula(call: OpCall) -> Cost:
        return _pointwise(call, per_element)

    return formula


def _names(bases: Iterable[str], inplace: bool = True) -> list[str]:
    out = []
    for b in bases:
        out.append(f"aten::_foreach_{b}")
        if inplace:
            out.append(f"aten::_foreach_{b}_")
    return out


for _op in BINARY + UNARY + TERNARY:
    register(*_names([_op]), family="foreach")(_make(FLOPS_PER_ELEMENT[_op]))


@register(*_names(REDUCE, inplace=False), family="foreach")
def _reduce(call: OpCall) -> Cost:
    # _foreach_norm(self, ord=2, dtype=None), _foreach_max(self): one scalar per tensor
    ins, outs = _split(call)
    if _uncostable(call, ins, outs):
        return fallback(call)
    self_ = ins[0]
    base = _base(call.name)
    pos = _NORM_DTYPE if base != "max" else None
    results = [TensorMeta((), as_dtype(call.arg(pos), t.dtype) if pos else t.dtype) for t in self_]
    flops = REDUCE[base] * sum(t.numel for t in self_)
    written = _written(call, [t for x in outs for t in x], results)
    return _finish(flops, _reads(call, ins), written, ins + outs)


@register(*_names(["zero"]), family="fill")
def _zero(call: OpCall) -> Cost:
    # _foreach_zero_(self): writes self, reads nothing; _foreach_zero(self): a zeroed copy
    ins, outs = _split(call)
    if _uncostable(call, ins, outs):
        return fallback(call)
    self_ = ins[0]
    inferred = [TensorMeta(t.shape, t.dtype) for t in self_]
    if _inplace(call.name):
        written = _dense_bytes(self_)
    else:
        written = _written(call, [t for x in outs for t in x], inferred)
    return _finish(0, 0.0, written, ins + outs)


@register(*_names(["copy"]), "aten::_foreach_clone", family="foreach")
def _copy(call: OpCall) -> Cost:
    # _foreach_copy_(self, src, non_blocking): read src, write self; _foreach_copy: src into
    # new tensors of self's shapes and dtypes; _foreach_clone(self): read self, write a copy
    ins, outs = _split(call)
    if _uncostable(call, ins, outs):
        return fallback(call)
    self_, src = ins[0], ins[-1]
    inferred = [TensorMeta(t.shape, t.dtype) for t in self_]
    read = float(distinct_bytes(src))
    if _inplace(call.name):
        written = _dense_bytes(self_)
    else:
        written = _written(call, [t for x in outs for t in x], inferred)
    return _finish(0, read, written, [self_, src, *outs])


# --- the lists' dtypes, from the kernels a call launched ---------------------------------

_FUNCTOR = re.compile(r"(\w*Functor)<")
_MTA = "multi_tensor_apply_kernel<"


def _template_args(text: str, start: int) -> list[str]:
    """The top-level template arguments of the `<` just before `start`."""
    args, depth, cur = [], 0, []
    for ch in text[start:]:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            if depth == 0:
                args.append("".join(cur).strip())
                return args
            depth -= 1
        elif ch == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    return []  # unterminated: a truncated name


def kernel_dtypes(kernel_name: str) -> tuple[str, ...] | None:
    """Storage dtypes a `multi_tensor_apply_kernel` names: its functor's first template
    argument (every list's type), and for `CopyFunctor<dst, src, ...>` the source's too;
    None for any other kernel or a name that names none."""
    at = kernel_name.find(_MTA)
    if at < 0:
        return None
    m = _FUNCTOR.search(kernel_name, at + len(_MTA))
    if m is None:
        return None
    args = _template_args(kernel_name, m.end())
    count = 2 if m.group(1) == "CopyFunctor" else 1
    dtypes = tuple(canonical(a) for a in args[:count])
    if len(dtypes) < count or not all(dtypes):
        return None
    return dtypes  # type: ignore[return-value]


def lists_in(op_name: str, dtypes: tuple[str, ...]) -> str | tuple[str, ...]:
    """`cost_of`'s `list_dtypes` for op `op_name` from the dtypes its kernel names
    (`kernel_dtypes`): one for every list, or for a copy (self, src, out=)."""
    if _base(op_name) == "copy" and len(dtypes) == 2:
        return (dtypes[0], dtypes[1], dtypes[0])
    return dtypes[0]


def list_dtypes_of(op_name: str, kernel_names: Iterable[str]) -> str | tuple[str, ...] | None:
    """The dtypes of a `_foreach_*` call's TensorLists from the kernels it launched, for
    `cost_of(..., list_dtypes=...)` (`lists_in`). None when no multi_tensor_apply kernel
    names one or two of them disagree (the slow path launches per-tensor kernels under
    per-tensor ops, which carry their own dtypes)."""
    found = {d for d in map(kernel_dtypes, kernel_names) if d is not None}
    if len(found) != 1:
        return None
    return lists_in(op_name, found.pop())
