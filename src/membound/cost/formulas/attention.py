"""Scaled-dot-product attention, counted flash-style.

FLOPs: `torch.utils.flop_counter.sdpa_flop_count` (QKᵀ and PV, 2 per multiply-add; the
softmax is not counted) and `sdpa_backward_flop_count` (five products). Causal masking
halves both, since flash/efficient kernels skip fully masked blocks (torch's FlopCounter
does not halve; we do, because the roofline wants the work actually done).
Bytes (minimal, no L×L score matrix ever materialized):
- forward: q, k, v (+ mask/bias) read; out written; logsumexp (fp32, B·H·Lq) written by
  the kernels that keep it for backward;
- backward: dO, q, k, v, out, logsumexp (+ bias) read; dq, dk, dv written.
RNG seeds/offsets, cumulative-sequence tensors and debug masks are ignored (a few bytes).
Layout: the `_scaled_dot_product_*` ops take (B, H, L, E); `_flash_attention_*` and
`_efficient_attention_*` take (B, L, H, E).
"""

from __future__ import annotations

from dataclasses import dataclass

from membound.cost.call import OpCall, TensorMeta
from membound.cost.formulas._torch_flops import sdpa_backward_flops, sdpa_flops
from membound.cost.registry import Cost, read_write, register
from membound.dtypes import compute_key


@dataclass(frozen=True)
class _Fwd:
    extra: int | None  # mask / bias position
    causal: int  # is_causal (bool) or custom_mask_type (int, != 0 means causal) position
    lse: bool | int  # True: always written; int: position of compute_log_sumexp flag
    blhe: bool = False


@dataclass(frozen=True)
class _Bwd:
    out: int
    lse: int
    extra: int | None
    causal: int
    blhe: bool = False


_FWD = {
    "aten::scaled_dot_product_attention": _Fwd(3, 5, False),
    "aten::_scaled_dot_product_flash_attention": _Fwd(None, 4, True),
    "aten::_scaled_dot_product_flash_attention_for_cpu": _Fwd(5, 4, True),
    "aten::_scaled_dot_product_efficient_attention": _Fwd(3, 6, 4),
    "aten::_scaled_dot_product_cudnn_attention": _Fwd(3, 6, 4),
    "aten::_flash_attention_forward": _Fwd(None, 8, True, blhe=True),
    "aten::_efficient_attention_forward": _Fwd(3, 9, 10, blhe=True),
}

_BWD = {
    "aten::_scaled_dot_product_flash_attention_backward": _Bwd(4, 5, None, 11),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": _Bwd(4, 5, 8, 7),
    "aten::_scaled_dot_product_efficient_attention_backward": _Bwd(5, 6, 4, 11),
    "aten::_scaled_dot_product_cudnn_attention_backward": _Bwd(4, 5, 8, 14),
    "aten::_flash_attention_backward": _Bwd(4, 5, None, 11, blhe=True),
    "aten::_efficient_attention_backward": _Bwd(5, 10, 4, 14, blhe=True),
}


def _bhle(t: TensorMeta, blhe: bool) -> tuple[int, ...]:
    s = t.shape
    if len(s) == 3:  # unbatched (H, L, E)
        return (1, *s)
    return (s[0], s[2], s[1], s[3]) if blhe else tuple(s)


def _causal(call: OpCall, pos: int) -> bool:
    value = call.arg(pos, False)
    return bool(value) if isinstance(value, (bool, int)) else False


def _bytes(metas: list[TensorMeta | None]) -> int:
    return sum(m.nbytes for m in metas if m is not None)


@register(*_FWD, family="attention")
def _sdpa_forward(call: OpCall) -> Cost:
    spec = _FWD[call.name]
    q, k, v = call.tensor(0), call.tensor(1), call.tensor(2)
    qs, ks, vs = (_bhle(t, spec.blhe) for t in (q, k, v))
    flops = sdpa_flops(qs, ks, vs) * (0.5 if _causal(call, spec.causal) else 1.0)
    extra = call.tensor(spec.extra) if spec.extra is not None else None
    out = TensorMeta((*q.shape[:-1], v.shape[-1]), q.dtype)
    writes_lse = spec.lse is True or (
        isinstance(spec.lse, int) and not isinstance(spec.lse, bool) and bool(call.arg(spec.lse))
    )
    lse = TensorMeta((qs[0], qs[1], qs[2]), "float32") if writes_lse else None
    return read_write(flops, _bytes([q, k, v, extra]), _bytes([out, lse]), compute_key(q.dtype))


@register(*_BWD, family="attention")
def _sdpa_backward(call: OpCall) -> Cost:
    spec = _BWD[call.name]
    go, q, k, v = (call.tensor(i) for i in range(4))
    shapes = [_bhle(t, spec.blhe) for t in (go, q, k, v)]
    flops = sdpa_backward_flops(*shapes) * (0.5 if _causal(call, spec.causal) else 1.0)
    extra = call.tensor(spec.extra) if spec.extra is not None else None
    reads = [go, q, k, v, call.tensor(spec.out), call.tensor(spec.lse), extra]
    writes = [TensorMeta(t.shape, t.dtype) for t in (q, k, v)]
    return read_write(flops, _bytes(reads), _bytes(writes), compute_key(q.dtype))
