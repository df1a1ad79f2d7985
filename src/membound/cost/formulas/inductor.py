"""Kernels torch.compile (inductor) generates, costed from what the profiler records.

Inductor launches each Triton kernel inside a profiler range named like the kernel
(`triton_poi_fused_add_mul_0`, `triton_red_fused_native_layer_norm_0`,
`triton_per_fused__softmax_1`, `triton_tem_fused_mm_2`) whose recorded arguments are the
kernel's tensors (its inputs and its preallocated outputs) followed by its sizes (`xnumel`,
`rnumel`) as scalars. So, with `record_shapes=True`:

- Bytes (minimal): each tensor argument read or written once, in its storage dtype, at its
  real storage extent (an expanded, stride-0 argument costs what it stores). A buffer the
  kernel updates in place (`in_out_ptr`) is counted once, as its name is not recorded.
- FLOPs, estimated from the name: inductor names a kernel after the aten ops it fused
  (`descriptive_names="original_aten"`, the default). Per element of the largest tensor
  argument (the kernel's iteration space): each fused op's count from the pointwise,
  norm, softmax and reduction formulas (1 for add/mul/exp..., 5 for a layer-norm
  forward, ...); views and copies count 0. A template matmul (`triton_tem_fused_mm_*`,
  `addmm`, `bmm`) counts 2·M·N·K from its two operand shapes.
- A name with no fused op membound knows (`triton_poi_fused_0`, or a name inductor was
  told to shorten) is costed bytes-only: `family="inductor-bytes"`, 0 FLOPs. That places
  it on the memory roof, which is where a fused elementwise kernel lives.
"""

from __future__ import annotations

import re

from membound.cost.call import OpCall, TensorMeta, distinct_bytes
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


def inductor_cost(call: OpCall) -> Cost:
    parsed = parse_name(call.name)
    if parsed is None:
        raise ValueError(f"{call.name} is not an inductor kernel name")
    kind, ops = parsed
    tensors = call.tensors()
    nbytes = float(distinct_bytes(tensors))
    if kind == "tem" and any(op in _MATMULS for op in ops):
        flops = _matmul_flops(tensors)
        if flops is not None:
            dtype = max(tensors, key=lambda t: t.numel).dtype if tensors else "float32"
            return Cost(flops, nbytes, compute_key(dtype), True, "inductor")
    known = [FUSED_FLOPS[op] for op in ops if op in FUSED_FLOPS]
    if not known or kind == "tem":
        return Cost(0.0, nbytes, VECTOR, True, "inductor-bytes")
    elements = max((t.numel for t in tensors), default=0)
    return Cost(float(elements * sum(known)), nbytes, VECTOR, True, "inductor")


register_prefix("triton_poi_", "triton_red_", "triton_per_", "triton_tem_", family="inductor")(
    inductor_cost
)
