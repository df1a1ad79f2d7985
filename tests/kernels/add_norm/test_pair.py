"""The SM-pair backward (`pair.py`): two programs per row, one per column half, exchanging the
row sums through tagged slots, and its fallback when a partner's sums do not come."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from membound.kernels.add_norm import LaunchConfig, bwd_config, configured  # noqa: E402
from membound.kernels.add_norm.pair import (  # noqa: E402
    SLOTS_PER_PAIR,
    _add_norm_bwd_pair_kernel,
)

from .cases import ALL, run_case, wide_bwd, wide_rows  # noqa: E402


@pytest.mark.parametrize("fallback", [None, 2], ids=["vectorized", "per-thread"])
@pytest.mark.parametrize("is_rms", [False, True], ids=["layer", "rms"])
@pytest.mark.parametrize("dtype,p", [(torch.float32, 0.2), (torch.bfloat16, 0.0)])
def test_pair_backward_matches(is_rms, dtype, p, fallback):
    """Two programs per row, one per column half (32 of 64; N = 41 leaves the second half
    partial), 2 pairs over 7 rows (uneven), row sums exchanged through tagged slots. The
    interpreter runs programs one by one: even programs find no partner sums and compute
    them from the other half, odd ones take the published ones; both must give every
    gradient against float64 and dx equal to the one-tile kernel's. `per-thread`: the GPU's
    fallback (the partner's sums element by element, no barrier) in its place."""
    cfg = LaunchConfig(1, 64, 1, False, programs_per_sm=1, pair=True)
    with configured(pair_fallback=fallback) as knobs:
        assert knobs.pair_fallback == fallback
        _, dx = run_case(7, 41, dtype, is_rms, ALL, p, bwd_cfg=cfg)
        _, dx_tiled = run_case(7, 41, dtype, is_rms, ALL, p)
        torch.testing.assert_close(dx, dx_tiled, rtol=1e-2, atol=1e-2)
        run_case(1, 9, dtype, is_rms, ("weight",), p, bwd_cfg=LaunchConfig(1, 16, 1, False, 1,
                                                                           pair=True))  # fmt: skip


@pytest.mark.parametrize("is_rms", [False, True], ids=["layer", "rms"])
def test_pair_is_the_default_for_rows_of_9000(is_rms):
    """N = 9000 -> 16384-wide tiles: the backward pairs two programs per row by default."""
    assert bwd_config(3, 9000).pair and bwd_config(3, 9000).block_n == 16384
    run_case(3, 9000, torch.float32, is_rms, ALL, p=0.2)
    run_case(3, 9000, torch.bfloat16, is_rms, ALL, p=0.2)


def test_pair_exchange_slots_end_tagged_and_partials_cover_both_halves():
    """After a paired backward every published slot carries its row's tag (row + 1) in the
    high 32 bits; slots of never-published parities stay 0."""
    M, N, half = 6, 64, 32
    g = torch.Generator().manual_seed(0)
    s, dy = (torch.randn(M, N, generator=g) for _ in range(2))
    mean, rstd = s.mean(1), torch.rsqrt(s.var(1, unbiased=False) + 1e-5)
    dx, dr = torch.empty_like(s), torch.empty_like(s)
    dw, db = torch.zeros(2, N), torch.zeros(2, N)
    ex = torch.zeros(2 * SLOTS_PER_PAIR, dtype=torch.int64)
    _add_norm_bwd_pair_kernel[(4,)](
        dy, dy, s, mean, rstd, dy, dx, dr, dw, db, rstd, ex, M, N, N, N, N, N, N, 0, 0, 1.0, 0,
        HAS_DS=False, HAS_W=False, HAS_DW=True, HAS_DB=True, HAS_DPB=False, STORE_DR=False,
        DROPOUT=False, IS_RMS=False, HALF_N=half,
    )  # fmt: skip
    slots = ex.view(2, 4, 2, 4)  # pair, row parity, half, sum
    for pair in range(2):
        for j in range(3):  # rows pair, pair + 2, pair + 4
            tags = slots[pair, j % 4, :, :3] >> 32
            assert (tags == pair + 2 * j + 1).all()
        assert (slots[pair, 3] == 0).all()
    xhat = (s - mean[:, None]) * rstd[:, None]
    torch.testing.assert_close(db.sum(0), dy.sum(0))
    torch.testing.assert_close(dw.sum(0), (dy * xhat).sum(0), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_gpu_pair_backward_exchange_and_fallback_agree_bitwise():
    """The SM-pair backward at full width (the default at 16384): identical bit for bit
    across repeated calls (deterministic under normal scheduling), and the fallback (threads
    that find no partner sums at once sum the partner's half themselves, pair_spin = 0)
    agrees to rounding. (At 16384 in bf16 the Gluon backward runs where it can: off here.)"""
    assert bwd_config(4096, 16384).pair
    rows = wide_rows(3)
    with configured(bwd_gluon=None):
        first, again = wide_bwd(*rows), wide_bwd(*rows)
        with configured(pair_spin=0):
            alone = wide_bwd(*rows)
    for a, b, c in zip(first, again, alone, strict=True):
        if a is not None:
            assert torch.equal(a, b)
            torch.testing.assert_close(c.float(), a.float(), rtol=1e-2, atol=1e-2)
