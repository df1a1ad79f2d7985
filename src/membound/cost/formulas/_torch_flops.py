"""FLOP formulas borrowed from `torch.utils.flop_counter`, imported defensively.

torch 2.4 ... 2.13 all ship `mm_flop`, `bmm_flop`, `conv_flop_count`, `conv_backward_flop`,
`sdpa_flop_count` and `sdpa_backward_flop_count`; older ones lack GQA support in the
attention counts. Each name falls back to a local equivalent (same conventions: one
multiply-add = 2 FLOPs, bias terms ignored) if it is missing or rejects the shapes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

_UNSET = object()
_fc: object = _UNSET


def _get(name: str):
    """Look a formula up in torch.utils.flop_counter, imported on first use: that module
    pulls in triton (flex-attention registrations), which `import membound` must not."""
    global _fc
    if _fc is _UNSET:
        try:
            from torch.utils import flop_counter as module
        except ImportError:  # pragma: no cover - moved or stripped build
            module = None
        _fc = module
    return getattr(_fc, name, None) if _fc is not None else None


def _mm_flops(a: Sequence[int], b: Sequence[int]) -> int:
    fn = _get("mm_flop")
    if fn is not None:
        return int(fn(list(a), list(b)))
    return 2 * a[0] * a[1] * b[1]  # pragma: no cover


def _bmm_flops(a: Sequence[int], b: Sequence[int]) -> int:
    fn = _get("bmm_flop")
    if fn is not None:
        return int(fn(list(a), list(b)))
    return 2 * a[0] * a[1] * a[2] * b[2]  # pragma: no cover


def _conv_flops(x: Sequence[int], w: Sequence[int], out: Sequence[int], transposed: bool) -> int:
    fn = _get("conv_flop_count")
    if fn is not None:
        return int(fn(list(x), list(w), list(out), transposed))
    conv_shape = (x if transposed else out)[2:]  # pragma: no cover
    return 2 * x[0] * w[0] * w[1] * math.prod(w[2:]) * math.prod(conv_shape)  # pragma: no cover


def _conv_backward_flops(
    grad_out: Sequence[int],
    x: Sequence[int],
    w: Sequence[int],
    transposed: bool,
    mask: Sequence[bool],
) -> int:
    fn = _get("conv_backward_flop")
    outs = [list(x), list(w), None]
    if fn is not None:
        try:
            return int(
                fn(list(grad_out), list(x), list(w), None, None, None, None, transposed, None, None,
                   list(mask), outs)
            )  # fmt: skip
        except TypeError:  # pragma: no cover - signature changed
            pass
    total = 0  # pragma: no cover

    def t(s):  # pragma: no cover
        return [s[1], s[0], *s[2:]]

    if mask[0]:  # pragma: no cover
        total += _conv_flops(grad_out, w, x, not transposed)
    if mask[1]:  # pragma: no cover
        a, b = (t(grad_out), t(x)) if transposed else (t(x), t(grad_out))
        total += _conv_flops(a, b, t(w), False)
    return total  # pragma: no cover


def _own_sdpa(q: Sequence[int], k: Sequence[int], v: Sequence[int]) -> int:
    b, h, sq, d = q
    sk, dv = k[2], v[3]
    return 2 * b * h * sq * sk * d + 2 * b * h * sq * sk * dv


def _sdpa_flops(q: Sequence[int], k: Sequence[int], v: Sequence[int]) -> int:
    """(B, H, L, E) layout; GQA (fewer kv heads) counts work per query head."""
    fn = _get("sdpa_flop_count")
    if fn is not None:
        try:
            return int(fn(list(q), list(k), list(v)))
        except AssertionError:  # older torch: no GQA
            pass
    return _own_sdpa(q, k, v)


def _sdpa_backward_flops(
    grad_out: Sequence[int], q: Sequence[int], k: Sequence[int], v: Sequence[int]
) -> int:
    fn = _get("sdpa_backward_flop_count")
    if fn is not None:
        try:
            return int(fn(list(grad_out), list(q), list(k), list(v)))
        except AssertionError:
            pass
    b, h, sq, d = q
    sk, dv = k[2], v[3]
    # recompute scores, dV, dP, dQ, dK: five bmms
    return 2 * b * h * sq * sk * (d + dv + dv + d + d)


def _key(value):
    if isinstance(value, (list, tuple)):
        return tuple(_key(v) for v in value)
    return value


@functools.lru_cache(maxsize=4096)
def _cached(fn, args: tuple):
    return fn(*args)


# public, cached entry points (torch wraps its formulas in pytree conversions that cost
# tens of microseconds per call; traces repeat the same shapes thousands of times)
def mm_flops(a: Sequence[int], b: Sequence[int]) -> int:
    return _cached(_mm_flops, (_key(a), _key(b)))


def bmm_flops(a: Sequence[int], b: Sequence[int]) -> int:
    return _cached(_bmm_flops, (_key(a), _key(b)))


def conv_flops(x: Sequence[int], w: Sequence[int], out: Sequence[int], transposed: bool) -> int:
    return _cached(_conv_flops, (_key(x), _key(w), _key(out), bool(transposed)))


def conv_backward_flops(grad_out, x, w, transposed: bool, mask: Sequence[bool]) -> int:
    return _cached(
        _conv_backward_flops, (_key(grad_out), _key(x), _key(w), bool(transposed), _key(mask))
    )


def sdpa_flops(q: Sequence[int], k: Sequence[int], v: Sequence[int]) -> int:
    """(B, H, L, E) layout; GQA (fewer kv heads) counts work per query head."""
    return _cached(_sdpa_flops, (_key(q), _key(k), _key(v)))


def sdpa_backward_flops(grad_out, q, k, v) -> int:
    return _cached(_sdpa_backward_flops, (_key(grad_out), _key(q), _key(k), _key(v)))
