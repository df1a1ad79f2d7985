"""FLOP formulas of matmul, convolution and attention, with `torch.utils.flop_counter`'s
conventions (one multiply-add = 2 FLOPs, bias terms ignored), written here so the trace
analysis never imports torch: `torch.utils.flop_counter` imports torch and triton (2-3 s),
which `membound analyze` of a trace from a cluster must not need. `tests/cost/
test_flop_formulas.py` checks them against torch's own on random shapes; attention counts
work per query head (grouped-query attention too, which older torch asserts on).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence


def _mm_flops(a: Sequence[int], b: Sequence[int]) -> int:
    return 2 * a[0] * a[1] * b[1]


def _bmm_flops(a: Sequence[int], b: Sequence[int]) -> int:
    return 2 * a[0] * a[1] * a[2] * b[2]


def _conv_flops(x: Sequence[int], w: Sequence[int], out: Sequence[int], transposed: bool) -> int:
    conv_shape = (x if transposed else out)[2:]
    return 2 * x[0] * w[0] * w[1] * math.prod(w[2:]) * math.prod(conv_shape)


def _conv_backward_flops(
    grad_out: Sequence[int],
    x: Sequence[int],
    w: Sequence[int],
    transposed: bool,
    mask: Sequence[bool],
) -> int:
    """Input gradient (a transposed convolution of grad_out with w) and weight gradient (a
    convolution of x with grad_out), as torch's `conv_backward_flop` counts them."""

    def t(s):
        return [s[1], s[0], *s[2:]]

    total = 0
    if mask[0]:
        total += _conv_flops(grad_out, w, x, not transposed)
    if mask[1]:
        a, b = (t(grad_out), t(x)) if transposed else (t(x), t(grad_out))
        total += _conv_flops(a, b, t(w), False)
    return total


def _own_sdpa(q: Sequence[int], k: Sequence[int], v: Sequence[int]) -> int:
    b, h, sq, d = q
    sk, dv = k[2], v[3]
    return 2 * b * h * sq * sk * d + 2 * b * h * sq * sk * dv


def _sdpa_flops(q: Sequence[int], k: Sequence[int], v: Sequence[int]) -> int:
    """(B, H, L, E) layout; GQA (fewer kv heads) counts work per query head."""
    return _own_sdpa(q, k, v)


def _sdpa_backward_flops(
    grad_out: Sequence[int], q: Sequence[int], k: Sequence[int], v: Sequence[int]
) -> int:
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


# public, cached entry points (traces repeat the same shapes thousands of times)
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
