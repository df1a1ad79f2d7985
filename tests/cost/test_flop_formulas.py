"""membound's matmul/conv/attention FLOP formulas equal `torch.utils.flop_counter`'s on random
shapes (they are written out so the trace analysis needs no torch)."""

from __future__ import annotations

import random

import pytest

from membound.cost.formulas import _torch_flops as T

fc = pytest.importorskip("torch.utils.flop_counter")


def _shapes(seed: int, n: int = 200):
    rng = random.Random(seed)
    for _ in range(n):
        yield rng


def test_mm_and_bmm():
    for rng in _shapes(0):
        m, k, n = (rng.randint(1, 700) for _ in range(3))
        b = rng.randint(1, 9)
        assert T.mm_flops([m, k], [k, n]) == fc.mm_flop([m, k], [k, n])
        assert T.bmm_flops([b, m, k], [b, k, n]) == fc.bmm_flop([b, m, k], [b, k, n])


def test_convolution_forward():
    for rng in _shapes(1):
        n, ci, co, k, h = (rng.randint(1, 8), rng.choice([3, 16, 64]), rng.choice([8, 32]),
                           rng.choice([1, 3, 5]), rng.randint(5, 40))  # fmt: skip
        x = [n, ci, h, h]
        for transposed in (False, True):
            w = [ci, co, k, k] if transposed else [co, ci, k, k]
            size = h + k - 1 if transposed else h - k + 1
            out = [n, co, size, size]
            assert T.conv_flops(x, w, out, transposed) == fc.conv_flop_count(x, w, out, transposed)


def test_convolution_backward_is_the_two_convolutions_torch_counts():
    # torch's conv_backward_flop counts grad_input as a transposed convolution of grad_out
    # with w, and grad_weight as a convolution of x with grad_out; so do ours
    for rng in _shapes(2, 60):
        n, ci, co, k, h = (rng.randint(1, 4), rng.choice([3, 16]), rng.choice([8, 32]),
                           rng.choice([1, 3]), rng.randint(5, 20))  # fmt: skip
        x, w = [n, ci, h, h], [co, ci, k, k]
        g = [n, co, h - k + 1, h - k + 1]
        gi = fc.conv_flop_count(g, w, x, True)
        gw = fc.conv_flop_count([ci, n, h, h], [co, n, h - k + 1, h - k + 1], [ci, co, k, k], False)
        assert T.conv_backward_flops(g, x, w, False, [True, False, False]) == gi
        assert T.conv_backward_flops(g, x, w, False, [False, True, False]) == gw
        assert T.conv_backward_flops(g, x, w, False, [True, True, False]) == gi + gw


def test_attention_forward_and_backward():
    for q, k in (([2, 8, 128, 64], [2, 8, 128, 64]), ([4, 12, 256, 64], [4, 12, 512, 64])):
        assert T.sdpa_flops(q, k, k) == fc.sdpa_flop_count(q, k, k)
        assert T.sdpa_backward_flops(q, q, k, k) == fc.sdpa_backward_flop_count(q, q, k, k)
    # grouped-query attention: work per query head (torch 2.13 counts it the same way)
    q, kv = [2, 8, 128, 64], [2, 2, 256, 64]
    assert T.sdpa_flops(q, kv, kv) == 2 * 2 * 8 * 128 * 256 * (64 + 64)


STANDARD = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
            "float32", "float64", "complex64", "complex128"]  # fmt: skip


def test_type_promotion_is_torchs():
    import itertools

    import torch

    from membound.dtypes import promote_types, result_type

    for a, b in itertools.product(STANDARD, STANDARD):
        want = str(torch.promote_types(getattr(torch, a), getattr(torch, b))).removeprefix("torch.")
        assert promote_types(a, b) == want, (a, b)
    rng = random.Random(3)
    samples = {bool: True, int: 1, float: 1.0, complex: 1j}
    checked = 0
    for _ in range(1500):  # pointwise ops are costed from their first two operands
        ops = []
        for _ in range(rng.randint(1, 2)):
            if rng.random() < 0.3:
                ops.append(rng.choice([bool, int, float, complex]))
            else:
                ops.append((rng.choice(STANDARD), rng.random() < 0.3))
        if not any(isinstance(o, tuple) for o in ops):
            assert result_type(ops) == "float32"  # no tensor: the default dtype
            continue
        real = [
            torch.empty(() if o[1] else (1,), dtype=getattr(torch, o[0]), device="meta")
            if isinstance(o, tuple)
            else samples[o]
            for o in ops
        ]
        want = torch.result_type(*real) if len(real) == 2 else real[0].dtype
        assert result_type(ops) == str(want).removeprefix("torch."), ops
        checked += 1
    assert checked > 1000
