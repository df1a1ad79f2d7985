"""Kernels torch.compile (inductor) generates, costed from what the profiler records.

Inductor launches each Triton kernel inside a profiler range named like the kernel
(`triton_poi_fused_add_mul_0`, `triton_red_fused_native_layer_norm_0`,
`triton_per_fused__softmax_1`, `triton_tem_fused_mm_2`) whose recorded arguments are the
kernel's tensors (its inputs and its preallocated outputs) followed by its sizes (`xnumel`,
`rnumel`) as scalars. So, with `record_shapes=True`:

- Bytes (minimal): each tensor argument read or written once, in its storage dtype, at its
  real storage extent (an expanded, stride-0 argument costs what it stores). The trace does
  not say which arguments are inputs. Where the capture read the kernel's parameter names
  from its generated source (`OpCall.arg_names`, `trace.kernel_args`) and they fit the
  recorded arguments (one name per argument, a read/write role for every tensor), the
  bytes are split: `in_ptr*` and a template's `arg_*` are read, `out_ptr*` written, and a
  buffer updated in place (`in_out_ptr*`) is both read and written, so it counts twice,
  the true minimum; `read_bytes` is the share read, which sets the call's HBM roof
  (`analysis.roofline.hbm_rate`). Without names that fit (no capture meta, a parameter
  with no role such as a reduction's scratch `ws_ptr`) every argument counts once,
  `in_out_ptr` included, and the split is unknown (`read_bytes=None`).
- The iteration space bounds every argument. Inductor passes the sizes of its launch
  space (`xnumel`, `ynumel`, `r0_numel` ...) last, after any size variables (`ks0`) and
  RNG offsets (`load_seed_offset`); their product N is the number of points the kernel
  visits, and a point loads or stores one element of an argument per access. So an
  argument larger than N (the vocabulary an embedding gathers rows from, the logits
  nll_loss picks one element per row of, the gradient an embedding backward scatters
  into, the whole buffer a `cat` writes one slice of) costs N elements, not its size.
  That is the smallest defensible count: a kernel that reads one argument at two offsets
  per point (`x[..., ::2] + x[..., 1::2]`) touches up to 2·N of it, and is undercounted
  rather than invented. N is trusted when one tensor argument has exactly N elements (the
  outputs of a pointwise kernel, the reduced input of a reduction). When none has and the
  bound would shrink an argument, the trailing ints may not be the launch space (a
  symbolic size passed before `xnumel`, a reduction over a slice): the arguments cannot
  tell, so the bound is not applied and the cost is marked inexact (`exact=False`).
- FLOPs, estimated from the name: inductor names a kernel after the aten ops it fused
  (`descriptive_names="original_aten"`, the default). Per point of the iteration space
  (N above, or the largest tensor argument when N is unknown): each fused op's count from
  the pointwise, norm, softmax and reduction formulas (1 for add/mul/exp..., 5 for a
  layer-norm forward, ...); views and copies count 0. A template matmul (`triton_tem_fused_mm_*`,
  `addmm`, `bmm`) counts 2·M·N·K from its two operand shapes.
- A pointwise kernel whose one tensor argument spans the iteration space only writes it
  (inductor's zero fill before a scatter, named after the op it serves, an arange):
  `family="fill"`, 0 FLOPs, which holds it to the write roof; with names it reads 0 bytes.
  Names that make that one argument an `in_out_ptr` say it is an in-place update
  (`x.mul_(2)`), not a fill: costed as any other kernel, read and written.
- A name with no fused op membound knows (`triton_poi_fused_0`, or a name inductor was
  told to shorten) is costed bytes-only: `family="inductor-bytes"`, 0 FLOPs. That places
  it on the memory roof, which is where a fused elementwise kernel lives.
"""

from __future__ import annotations

import math
import re

from membound.cost.call import OpCall, TensorMeta
from membound.cost.formulas.norm import NORM_BWD_DW, NORM_BWD_DX, NORM_FWD, RMS_FWD
from membound.cost.formulas.pointwise import FLOPS_PER_ELEMENT
from membound.cost.formulas.softmax import DROPOUT_FWD, SOFTMAX_BWD, SOFTMAX_FWD
from membound.cost.registry import VECTOR, Cost, register_prefix
from membound.dtypes import compute_key

#: inductor's kernel-name prefixes: pointwise, reduction, persistent reduction, template
KINDS = {"poi": "pointwise", "red": "reduction", "per": "persistent reduction", "tem": "template"}
_NAME = re.compile(r"^triton_(poi|red|per|tem)_(.*)$")

#: FLOPs per element of the iteration space for the fused ops a kernel name lists
FUSED_FLOPS: dict[str, int] = {
    **FLOPS_PER_ELEMENT,
    "native_layer_norm": NORM_FWD + 2,
    "layer_norm": NORM_FWD + 2,
    "native_layer_norm_backward": NORM_BWD_DX + NORM_BWD_DW,
    "native_group_norm": NORM_FWD + 2,
    "native_batch_norm": NORM_FWD + 2,
    "_native_batch_norm_legit_functional": NORM_FWD + 2,
    "_fused_rms_norm": RMS_FWD + 1,
    "rms_norm": RMS_FWD + 1,
    "_softmax": SOFTMAX_FWD,
    "_log_softmax": SOFTMAX_FWD + 1,
    "_softmax_backward_data": SOFTMAX_BWD,
    "_log_softmax_backward_data": SOFTMAX_BWD,
    "native_dropout": DROPOUT_FWD,
    "native_dropout_backward": 2,
    "sum": 1,
    "mean": 1,
    "amax": 1,
    "amin": 1,
    "var_mean": 3,
    "var": 3,
    "prod": 1,
    "argmax": 1,
    "nll_loss_forward": 1,
    "nll_loss_backward": 1,
    "embedding_dense_backward": 1,
    # data movement: no arithmetic
    **dict.fromkeys(
        "_to_copy clone copy view permute transpose t expand slice select cat stack "
        "unsqueeze squeeze reshape alias constant_pad_nd index gather scatter full zeros "
        "ones fill embedding lift_fresh _unsafe_view split".split(),
        0,
    ),
}
#: inductor's launch-parameter prefixes and what a kernel does with that tensor: read,
#: written, read and written in place; a template's operands (`arg_A`, `arg_B`) are read.
#: Scalars (`xnumel`, `ks0`) and a scratch workspace (`ws_ptr`) have no role
PARAM_ROLES = (("in_out_ptr", "rw"), ("in_ptr", "r"), ("out_ptr", "w"), ("arg_", "r"))
_MATMULS = ("mm", "addmm", "bmm", "baddbmm", "_scaled_mm")
#: longest names first, so that "native_layer_norm_backward" wins over "native_layer_norm"
_VOCAB = sorted({*FUSED_FLOPS, *_MATMULS}, key=len, reverse=True)


def parse_name(name: str) -> tuple[str, list[str]] | None:
    """(kind, fused aten ops) of an inductor kernel name, or None for another name:
    "triton_red_fused__to_copy_add_mean_0" -> ("red", ["_to_copy", "add", "mean"])."""
    m = _NAME.match(name.split("::")[-1])
    if m is None:
        return None
    kind = m.group(1)
    rest = re.sub(r"_?\d+$", "", m.group(2))  # the kernel's serial number
    rest = rest.removeprefix("fused").removeprefix("_")
    ops: list[str] = []
    i = 0
    while i < len(rest):
        if rest[i] == "_" and not any(rest.startswith(v, i) for v in _VOCAB if v[0] == "_"):
            i += 1  # the separator between two op names
            continue
        hit = next((v for v in _VOCAB if rest.startswith(v, i) and _ends(rest, i + len(v))), None)
        if hit is None:  # an op membound has no count for: skip to the next separator
            j = rest.find("_", i + 1)
            ops.append("?")
            i = len(rest) if j < 0 else j
            continue
        ops.append(hit)
        i += len(hit)
    return kind, ops


def _ends(text: str, j: int) -> bool:
    return j == len(text) or text[j] == "_"


def _matmul_flops(tensors: list[TensorMeta]) -> float | None:
    """2·M·N·K from the first two operands (A: [..., M, K], B: [..., K, N])."""
    mats = [t for t in tensors if t.ndim >= 2]
    for i, a in enumerate(mats):
        for b in mats[i + 1 :]:
            if a.shape[-1] == b.shape[-2] and a.shape[:-2] == b.shape[:-2]:
                batch = 1
                for d in a.shape[:-2]:
                    batch *= d
                return 2.0 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1]
    return None


def iteration_space(call: OpCall) -> int | None:
    """Points the kernel's launch space visits: the product of the trailing run of positive
    integer arguments (`xnumel`, `r0_numel` ...), None when it recorded none.

    Inductor appends one size per range tree after the kernel's other arguments. The ints
    just before them (size variables `ks0`, RNG `load_seed_offset`) join the run only when
    positive, which can only make N larger: a looser bound, never a count above the
    argument's own size. A zero (a seed offset of 0) ends the run."""
    sizes: list[int] = []
    for value in reversed(call.inputs):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            break
        sizes.append(value)
    return math.prod(sizes) if sizes else None


def _touched(t: TensorMeta, space: int | None) -> int:
    """Elements of `t` a kernel visiting `space` points can touch, one access per point."""
    extent = int(t.extent if t.extent is not None else t.numel)
    return extent if space is None else min(extent, space)


def param_role(name: str) -> str | None:
    """'r', 'w' or 'rw' for a tensor parameter named by inductor (`PARAM_ROLES`), None for
    any other name."""
    for prefix, what in PARAM_ROLES:
        if name.startswith(prefix):
            return what
    return None


def tensor_roles(call: OpCall) -> list[str] | None:
    """The role ('r', 'w', 'rw') of each tensor argument of `call`, in the order of
    `call.tensors()`, from its parameter names; None when the names do not fit the recorded
    arguments: none given, not one per argument, a tensor whose name has no role (a
    scratch `ws_ptr`, a name from another kernel), or a TensorList (an inductor kernel
    passes none). Not fitting is not guessed at: the caller costs the call without them."""
    names = call.arg_names
    if names is None or len(names) != len(call.inputs):
        return None
    roles: list[str] = []
    for value, name in zip(call.inputs, names, strict=True):
        if isinstance(value, (list, tuple)):
            return None
        if isinstance(value, TensorMeta):
            what = param_role(name)
            if what is None:
                return None
            roles.append(what)
    return roles


def inductor_cost(call: OpCall) -> Cost:
    parsed = parse_name(call.name)
    if parsed is None:
        raise ValueError(f"{call.name} is not an inductor kernel name")
    kind, ops = parsed
    tensors = call.tensors()
    roles = tensor_roles(call)
    # a template (matmul) kernel has no launch-space sizes: it reads its operands whole
    space = None if kind == "tem" else iteration_space(call)
    exact = True
    if space is not None and any(_touched(t, space) < _touched(t, None) for t in tensors):
        # N bounds an argument: trusted only if some argument spans exactly N points; else
        # the trailing ints may not be the launch space, and the bound is not applied
        if not any(t.numel == space for t in tensors):
            space, exact = None, False
    # post hoc every argument is a distinct buffer: inductor passes a buffer it both reads
    # and writes once (`in_out_ptr`), so no two arguments alias
    touched = [float(_touched(t, space) * t.itemsize) for t in tensors]
    reads: float | None = None
    largest: float | None = None
    if roles is None:
        nbytes = sum(touched)
    else:
        # an in_out_ptr is in both sums: read and written, once each
        read = [b for b, r in zip(touched, roles, strict=True) if "r" in r]
        reads, largest = sum(read), max(read, default=0.0)
        nbytes = reads + sum(b for b, r in zip(touched, roles, strict=True) if "w" in r)
    one_span = len(tensors) == 1 and space is not None and tensors[0].numel == space
    if kind == "poi" and one_span and (roles is None or roles == ["w"]):
        # one buffer, written at every point: a fill (the zeros an embedding backward
        # scatters into, an arange), held to the write roof. Without names an in-place
        # update of that one buffer (`x.mul_(2)`) looks the same: counted once, at the
        # write roof its fraction is understated, never above the roof
        return Cost(0.0, nbytes, VECTOR, exact, "fill", read_bytes=reads, largest_read=largest)
    if kind == "tem" and any(op in _MATMULS for op in ops):
        flops = _matmul_flops(tensors)
        if flops is not None:
            dtype = max(tensors, key=lambda t: t.numel).dtype if tensors else "float32"
            return Cost(
                flops,
                nbytes,
                compute_key(dtype),
                True,
                "inductor",
                read_bytes=reads,
                largest_read=largest,
            )
    known = [FUSED_FLOPS[op] for op in ops if op in FUSED_FLOPS]
    if not known or kind == "tem":
        return Cost(
            0.0, nbytes, VECTOR, exact, "inductor-bytes", read_bytes=reads, largest_read=largest
        )
    elements = max((t.numel if space is None else min(t.numel, space) for t in tensors), default=0)
    return Cost(
        float(elements * sum(known)),
        nbytes,
        VECTOR,
        exact,
        "inductor",
        read_bytes=reads,
        largest_read=largest,
    )


register_prefix("triton_poi_", "triton_red_", "triton_per_", "triton_tem_", family="inductor")(
    inductor_cost
)
