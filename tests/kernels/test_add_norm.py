"""add_norm Triton kernels against a float64 reference (CPU: Triton interpreter; GPU: marked).

Every output and gradient is compared on fresh random inputs with the kernels' own dropout
mask (regenerated through the same Philox stream by `dropout_mask`); outputs are poisoned
(launchers allocate with torch.empty; we also check for NaN) so unwritten elements fail.
"""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("triton")

from membound.kernels import add_norm as K  # noqa: E402
from membound.kernels.add_norm_config import LaunchConfig, bwd_config, fwd_config  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"
TOL = {torch.float32: 2e-4, torch.float16: 1e-2, torch.bfloat16: 5e-2}


@pytest.fixture(autouse=True)
def _poison(monkeypatch):
    monkeypatch.setattr(K, "POISON_OUTPUTS", True)


def _close(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype, what: str) -> None:
    assert got.shape == want.shape, what
    assert torch.isfinite(got).all(), f"{what}: non-finite (unwritten?) elements"
    err = (got.double() - want.double()).abs().max().item()
    scale = max(1.0, want.abs().max().item())
    assert err <= TOL[dtype] * scale, f"{what}: max error {err:.3g} (scale {scale:.3g})"


def _run_case(M, N, dtype, is_rms, parts, p, seed=1234, fwd_cfg=None, bwd_cfg=None, dev=DEV):
    """Forward and backward through the kernels vs float64 autograd; returns the mask."""
    g = torch.Generator(device="cpu").manual_seed(M * 1000 + N)

    def rnd(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(dev)

    x = rnd(M, N).to(dtype)
    res = rnd(M, N).to(dtype) if "residual" in parts else None
    pb = rnd(N, scale=0.5).to(dtype) if "pre_bias" in parts else None
    w = (1 + rnd(N, scale=0.3)).to(dtype) if "weight" in parts else None
    b = rnd(N, scale=0.3).to(dtype) if "bias" in parts else None
    store_s = res is not None or pb is not None or p > 0
    y, s, mean, rstd = K.add_norm_fwd(
        x, w, b, res, pb, eps=1e-5, is_rms=is_rms, dropout_p=p, seed=seed, store_s=store_s,
        config=fwd_cfg,
    )  # fmt: skip
    keep = K.dropout_mask(seed, M, N, p, dev) if p > 0 else None
    leaves = {
        k: t.double().requires_grad_()
        for k, t in dict(x=x, residual=res, pre_bias=pb, weight=w, bias=b).items()
        if t is not None
    }
    yr, sr, _, rstd_r = K.add_norm_ref(
        leaves["x"], leaves.get("weight"), leaves.get("bias"), leaves.get("residual"),
        leaves.get("pre_bias"), eps=1e-5, is_rms=is_rms, dropout_p=p, keep=keep,
        compute_dtype=torch.float64,
    )  # fmt: skip
    _close(y, yr, dtype, "y")
    if store_s:
        _close(s, sr, dtype, "s")
    _close(rstd, rstd_r, torch.float32 if dtype == torch.float32 else dtype, "rstd")
    dy = rnd(M, N).to(dtype)
    ds = rnd(M, N).to(dtype) if store_s else None
    loss = (yr * dy.double()).sum() + ((sr * ds.double()).sum() if ds is not None else 0)
    loss.backward()
    dx, dr, dw, db, dpb = K.add_norm_bwd(
        dy, ds, s if store_s else x, mean, rstd, w, is_rms=is_rms, dropout_p=p, seed=seed,
        want_dweight=w is not None, want_dbias=b is not None, want_dpre_bias=pb is not None,
        dres_dtype=dtype if res is not None else None, config=bwd_cfg,
    )  # fmt: skip
    _close(dx, leaves["x"].grad, dtype, "dx")
    if res is not None:
        _close(dr, leaves["residual"].grad, dtype, "dresidual")
    for name, got in (("weight", dw), ("bias", db), ("pre_bias", dpb)):
        if name in leaves:
            _close(got, leaves[name].grad, dtype, f"d{name}")
        else:
            assert got is None
    return keep, dx


ALL = ("residual", "pre_bias", "weight", "bias")
SHAPES = [(9, 41), (3, 341), (2, 4231), (1, 1), (64, 128)]


@pytest.mark.parametrize("M,N", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("is_rms", [False, True], ids=["layer", "rms"])
def test_all_parts_with_dropout(M, N, dtype, is_rms):
    _run_case(M, N, dtype, is_rms, ALL, p=0.25)


@pytest.mark.parametrize(
    "parts",
    [(), ("residual",), ("pre_bias",), ("weight",), ("bias",), ("weight", "bias"), ALL],
    ids=lambda p: "+".join(p) or "none",
)
@pytest.mark.parametrize("is_rms", [False, True], ids=["layer", "rms"])
def test_each_optional_part_without_dropout(parts, is_rms):
    _run_case(9, 41, torch.float32, is_rms, parts, p=0.0)


@pytest.mark.parametrize("is_rms", [False, True], ids=["layer", "rms"])
@pytest.mark.parametrize("p", [0.0, 0.3])
def test_chunked_kernels_match(is_rms, p):
    """Rows wider than a tile: force the chunked kernels with small chunks (odd width, so the
    last chunk is partial) and a persistent grid smaller than the row count."""
    cfg = LaunchConfig(block_m=1, block_n=64, num_warps=1, chunked=True, programs_per_sm=1)
    keep, _ = _run_case(5, 341, torch.float32, is_rms, ALL, p, fwd_cfg=cfg, bwd_cfg=cfg)
    if p:  # the mask does not depend on the chunking
        keep_tiled, _ = _run_case(5, 341, torch.float32, is_rms, ALL, p)
        assert torch.equal(keep, keep_tiled)


@pytest.mark.parametrize("is_rms", [False, True], ids=["layer", "rms"])
def test_wide_tile_reloads_parameters(is_rms):
    """N = 9000 -> 16384-wide tiles by default: the forward's one tile re-reads weight/bias
    per tile instead of holding them; the backward pairs two programs per row (the default)
    or splits off the parameter pass (the default above 16384, forced here)."""
    assert fwd_config(3, 9000).block_n == 16384 and not fwd_config(3, 9000).chunked
    assert bwd_config(3, 9000).pair and bwd_config(3, 9000).block_n == 16384
    split = bwd_config(3, 16385)
    assert split.split_params and split.chunked
    _run_case(3, 9000, torch.float32, is_rms, ALL, p=0.2, bwd_cfg=split)
    _run_case(3, 9000, torch.float32, is_rms, ALL, p=0.2)  # SM-pair backward
    _run_case(3, 9000, torch.bfloat16, is_rms, ALL, p=0.2)


@pytest.mark.parametrize("N", [1500, 3000, 5000, 9000])
def test_plain_norms_take_their_own_shapes(N):
    """x in, y out (no residual, no dropout): RMSNorm and LayerNorm use their own launch
    shapes where they have one (`LIGHT_FWD_RMS`, `LIGHT_FWD`), else the fused op's; same
    results."""
    from membound.kernels.add_norm_config import LIGHT_FWD, LIGHT_FWD_RMS

    bn = 1 << (N - 1).bit_length()
    for table, rms in ((LIGHT_FWD, False), (LIGHT_FWD_RMS, True)):
        assert fwd_config(2, N, 2, 2, rms) == table.get(bn, fwd_config(2, N))
    assert bn in LIGHT_FWD or bn in LIGHT_FWD_RMS  # each width here runs a plain shape
    _run_case(2, N, torch.bfloat16, True, ("weight",), 0.0)
    _run_case(2, N, torch.float16, False, ("weight", "bias"), 0.0)


def test_pair_backward_can_be_switched_off(monkeypatch):
    """`BWD_PAIR = None` (the README's switch for GPUs shared with other kernels) gives rows
    of 9000-16384 the two-pass backward."""
    import membound.kernels.add_norm_config as C

    monkeypatch.setattr(C, "BWD_PAIR", None)
    C.bwd_config.cache_clear()
    try:
        assert bwd_config(32768, 16384).split_params and not bwd_config(32768, 16384).pair
    finally:
        C.bwd_config.cache_clear()


def test_persistent_forward_grid_and_multi_row_tiles():
    cfg = LaunchConfig(block_m=4, block_n=64, num_warps=1, chunked=False, programs_per_sm=1)
    _run_case(19, 41, torch.float32, False, ALL, 0.2, fwd_cfg=cfg, bwd_cfg=cfg)


@pytest.mark.parametrize("is_rms", [False, True])
@pytest.mark.parametrize("block_m", [1, 4])
def test_prefetching_persistent_kernels(block_m, is_rms):
    """PREFETCH: each program loads its next tile before computing the current one; 23 rows
    over 3 programs leave a partial last tile and prefetches past the end (masked)."""
    cfg = LaunchConfig(block_m, 64, 1, False, programs_per_sm=1, prefetch=True)
    # the interpreter's grid is 4 programs per "SM" count: cap it at 3 through the rows
    _run_case(23, 41, torch.bfloat16, is_rms, ALL, 0.2, fwd_cfg=cfg, bwd_cfg=cfg)
    _run_case(2, 41, torch.float32, is_rms, ALL, 0.0, fwd_cfg=cfg, bwd_cfg=cfg)


@pytest.mark.parametrize("is_rms", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_split_parameter_backward(dtype, is_rms):
    """split_params: the row kernel writes dx/dres only, a second pass sums dweight, dbias
    and dpre_bias over row blocks (19 rows over 8 row programs: uneven, and some empty)."""
    cfg = LaunchConfig(1, 64, 1, False, programs_per_sm=0, split_params=True)
    _run_case(19, 41, dtype, is_rms, ALL, 0.2, bwd_cfg=cfg)
    _run_case(3, 7, dtype, is_rms, ("weight",), 0.0, bwd_cfg=cfg)
    # the row pass may be the chunked kernel (two passes over 16-wide chunks, no accumulators)
    chunked = LaunchConfig(1, 16, 1, True, programs_per_sm=1, split_params=True)
    _run_case(19, 41, dtype, is_rms, ALL, 0.2, bwd_cfg=chunked)


@pytest.mark.parametrize("fallback", [None, 2], ids=["vectorized", "per-thread"])
@pytest.mark.parametrize("is_rms", [False, True], ids=["layer", "rms"])
@pytest.mark.parametrize("dtype,p", [(torch.float32, 0.2), (torch.bfloat16, 0.0)])
def test_pair_backward_matches(is_rms, dtype, p, fallback, monkeypatch):
    """The SM-pair backward: two programs per row, one per column half (32 of 64; N = 41
    leaves the second half partial), 2 pairs over 7 rows (uneven), row sums exchanged through
    tagged slots. The interpreter runs programs one by one: even programs find no partner
    sums and compute them from the other half, odd ones take the published ones; both must
    give every gradient against float64 and dx equal to the one-tile kernel's. `per-thread`:
    the GPU's fallback (the partner's sums element by element, no barrier) in its place."""
    monkeypatch.setattr(K, "PAIR_FALLBACK", fallback)
    monkeypatch.setattr(K, "_PLANS", {})
    cfg = LaunchConfig(1, 64, 1, False, programs_per_sm=1, pair=True)
    _, dx = _run_case(7, 41, dtype, is_rms, ALL, p, bwd_cfg=cfg)
    _, dx_tiled = _run_case(7, 41, dtype, is_rms, ALL, p)
    torch.testing.assert_close(dx, dx_tiled, rtol=1e-2, atol=1e-2)
    _run_case(1, 9, dtype, is_rms, ("weight",), p, bwd_cfg=LaunchConfig(1, 16, 1, False, 1,
                                                                          pair=True))  # fmt: skip


def test_pair_exchange_slots_end_tagged_and_partials_cover_both_halves():
    """After a paired backward every published slot carries its row's tag (row + 1) in the
    high 32 bits; slots of never-published parities stay 0."""
    from membound.kernels.add_norm_pair import SLOTS_PER_PAIR, _add_norm_bwd_pair_kernel

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


def test_dropout_keep_rate_seeds_and_backward_mask():
    M, N, p = 64, 1000, 0.3
    keep = K.dropout_mask(7, M, N, p, DEV)
    n = keep.numel()
    rate = keep.float().mean().item()
    assert abs(rate - (1 - p)) <= 5 * math.sqrt(p * (1 - p) / n)
    assert torch.equal(keep, K.dropout_mask(7, M, N, p, DEV))
    assert not torch.equal(keep, K.dropout_mask(8, M, N, p, DEV))
    assert K.dropout_mask(7, M, N, 1.0, DEV).sum() == 0
    assert K.dropout_mask(7, M, N, 0.0, DEV).all()
    # the forward used this mask (zeros exactly where dropped), and so did the backward
    x = torch.rand(M, N, device=DEV) + 1.0  # no exact zeros in x + 0
    _, s, mean, rstd = K.add_norm_fwd(x, None, None, None, None, eps=1e-5, is_rms=False,
                                      dropout_p=p, seed=7)  # fmt: skip
    assert torch.equal(s == 0, ~keep)
    torch.testing.assert_close(s[keep], x[keep] / (1 - p))
    dx = K.add_norm_bwd(torch.randn(M, N, device=DEV), None, s, mean, rstd, None,
                        is_rms=False, dropout_p=p, seed=7)[0]  # fmt: skip
    assert torch.equal(dx == 0, ~keep)


@pytest.mark.parametrize(
    "seed,M,N,p", [(7, 3, 41, 0.3), (2**40 + 123, 5, 300, 0.5), (3, 1, 1, 0.1), (9, 2, 16, 0.9)]
)
def test_kernel_mask_is_the_philox_reference_stream(seed, M, N, p):
    """An independent PyTorch Philox-4x32-10 gives the kernels' mask bit for bit: one call
    per 8 columns, 16-bit slices, the documented interleave."""
    from membound.kernels.add_norm_ref import dropout_keep_philox

    assert torch.equal(K.dropout_mask(seed, M, N, p, DEV), dropout_keep_philox(seed, M, N, p))


def test_identical_seeds_identical_results():
    x = torch.randn(9, 41, device=DEV)
    r = torch.randn(9, 41, device=DEV)
    a = K.add_norm_fwd(x, None, None, r, None, eps=1e-5, is_rms=False, dropout_p=0.5, seed=3)
    b = K.add_norm_fwd(x, None, None, r, None, eps=1e-5, is_rms=False, dropout_p=0.5, seed=3)
    c = K.add_norm_fwd(x, None, None, r, None, eps=1e-5, is_rms=False, dropout_p=0.5, seed=4)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[1], c[1])


@pytest.mark.parametrize("is_rms", [False, True], ids=["layer", "rms"])
def test_zero_variance_rows_stay_finite(is_rms):
    x = torch.full((4, 41), 2.5, device=DEV)
    x[1] = 0.0
    w = torch.randn(41, device=DEV)
    y, _, mean, rstd = K.add_norm_fwd(
        x, w, None, None, None, eps=1e-5, is_rms=is_rms, store_s=False
    )
    assert torch.isfinite(y).all() and torch.isfinite(rstd).all()
    if not is_rms:
        assert y.abs().max() == 0
    dx, *_ = K.add_norm_bwd(torch.randn_like(x), None, x, mean, rstd, w, is_rms=is_rms)
    assert torch.isfinite(dx).all()


def test_fp16_large_magnitudes_do_not_overflow():
    # 3e4 fits fp16 (max 65504) but its square and any sum of a few do not: fp32 math must hold
    x = (torch.randn(6, 341, device=DEV) * 3e4).clamp(-6e4, 6e4).half()
    r = (torch.randn(6, 341, device=DEV) * 1e3).half()
    y, s, mean, rstd = K.add_norm_fwd(x, None, None, r, None, eps=1e-5, is_rms=False)
    assert torch.isfinite(y).all() and torch.isfinite(s).all()
    ref = torch.nn.functional.layer_norm((x.float() + r.float()), (341,))
    assert (y.float() - ref).abs().max() < 2e-2
    dx, *_ = K.add_norm_bwd(torch.randn_like(y), None, s, mean, rstd, None, is_rms=False)
    assert torch.isfinite(dx).all()


def test_strided_rows_without_copy():
    base = torch.randn(6, 100, device=DEV)
    x = base[:, 10:51]  # row stride 100, 41 wide
    r = torch.randn(12, 41, device=DEV)[::2]  # row stride 82
    y, s, *_ = K.add_norm_fwd(x, None, None, r, None, eps=1e-5, is_rms=False)
    ref = torch.nn.functional.layer_norm(x + r, (41,), eps=1e-5)
    torch.testing.assert_close(y, ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(s, x + r)


def test_weight_held_across_tiles_only_by_persistent_programs(monkeypatch):
    """W_ONCE (weight and bias loaded before the loop and held) only where a program does
    several tiles: a one-tile program loads them after the statistics, in fewer registers."""
    plans = []
    monkeypatch.setattr(K, "launch_planned", lambda plan, args: plans.append(plan))
    meta = torch.device("meta")
    for n, store_s, cfg in ((4096, True, None), (4096, False, LaunchConfig(1, 4096, 8, False, 0)),
                            (4096, False, LaunchConfig(2, 4096, 16, False, 2, prefetch=True)),
                            (1024, True, LaunchConfig(2, 1024, 4, False, 4))):  # fmt: skip
        x, r = (torch.empty(64, n, dtype=torch.bfloat16, device=meta) for _ in range(2))
        w = torch.empty(n, dtype=torch.bfloat16, device=meta)
        K.add_norm_fwd(x, w, w, r if store_s else None, None, eps=1e-5, is_rms=False,
                       store_s=store_s, config=cfg)  # fmt: skip
    assert [p.constexprs["W_ONCE"] for p in plans] == [False, False, True, True]


def test_launch_configs_by_size():
    small = fwd_config(2048, 64)
    assert small.block_m > 1 and not small.chunked  # many rows per program for small rows
    assert fwd_config(4, 64).block_m == 4  # never a tile taller than the tensor
    assert not fwd_config(32768, 4096).chunked and fwd_config(8, 65536).chunked
    # run 4 (H200, GPU time): the best measured shape per width
    assert fwd_config(32768, 1024) == LaunchConfig(2, 1024, 4, False, 0)
    assert fwd_config(32768, 2048) == LaunchConfig(1, 2048, 4, False, 0)
    assert fwd_config(32768, 4096) == LaunchConfig(1, 4096, 8, False, 0)
    assert fwd_config(32768, 8192) == LaunchConfig(1, 8192, 32, False, 4, prefetch=True)
    assert fwd_config(32768, 16384) == LaunchConfig(1, 16384, 32, False, 1, prefetch=True)
    assert fwd_config(32768, 16385) == LaunchConfig(1, 2048, 8, True, 8)
    assert fwd_config(32768, 16384, 4).chunked and not fwd_config(32768, 8192, 4).chunked
    assert bwd_config(32768, 1024) == LaunchConfig(2, 1024, 4, False, 4, prefetch=True)
    assert bwd_config(32768, 4096) == LaunchConfig(1, 4096, 8, False, 2, prefetch=True)
    assert bwd_config(32768, 16384) == LaunchConfig(1, 16384, 16, False, 1, pair=True)
    assert bwd_config(32768, 16385) == LaunchConfig(1, 8192, 16, True, 2, split_params=True)
    assert bwd_config(8, 65536).chunked and bwd_config(8, 65536).split_params
    # a plain norm (x in, y out) where its own shapes measured better; elsewhere the fused one
    assert fwd_config(32768, 4096, 2, 2) == LaunchConfig(2, 4096, 8, False, 0)
    assert fwd_config(32768, 1024, 2, 2) == fwd_config(32768, 1024)
    # RMSNorm alone has its own; a 64 KB fp32 row of 16384 keeps the fused (chunked) shape
    assert fwd_config(32768, 16384, 2, 2, True) == LaunchConfig(1, 16384, 16, False, 0)
    assert fwd_config(32768, 16384, 4, 2, True) == fwd_config(32768, 16384, 4)
    assert fwd_config(1, 1).block_n == 8  # one Philox call covers 8 columns
    for n in (1, 7, 64, 300, 1024, 4096, 8192, 16384, 65536):
        for rows in (1, 5, 32768):
            for cfg in (fwd_config(rows, n), bwd_config(rows, n)):
                assert 1 <= cfg.num_warps <= 32 and cfg.block_m <= max(1, rows) * 2
                assert cfg.programs_per_sm >= 0 and cfg.block_n >= 8


# ----------------------------------------------------------------------------- GPU, full size


@pytest.mark.gpu
@pytest.mark.parametrize("M,N", [(32768, 1024), (2048, 16384), (64, 65536), (1000, 4231)])
@pytest.mark.parametrize(
    "dtype,is_rms",
    [(torch.float32, False), (torch.bfloat16, False), (torch.float16, True)],
)
def test_gpu_full_size_against_float64(M, N, dtype, is_rms):
    _run_case(M, N, dtype, is_rms, ALL, p=0.1, dev="cuda")


def _wide_rows(seed, M=4096, N=16384):
    """(s, dy, weight, mean, rstd) of a bf16 backward problem on the GPU."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    s, dy = (torch.randn(M, N, device="cuda", generator=g).bfloat16() for _ in range(2))
    w = torch.randn(N, device="cuda", generator=g).bfloat16()
    sf = s.float()
    return s, dy, w, sf.mean(1), torch.rsqrt(sf.var(1, unbiased=False) + 1e-5)


def _wide_bwd(s, dy, w, mean, rstd):
    """The backward of `_wide_rows`' problem (dropout 0.1, residual, weight and bias
    gradients), planned afresh."""
    K._PLANS.clear()
    return K.add_norm_bwd(dy, None, s, mean, rstd, w, is_rms=False, dropout_p=0.1, seed=5,
                          want_dweight=True, want_dbias=True, dres_dtype=torch.bfloat16)  # fmt: skip


@pytest.mark.gpu
def test_gpu_pair_backward_exchange_and_fallback_agree_bitwise(monkeypatch):
    """The SM-pair backward at full width (the default at 16384): identical bit for bit
    across repeated calls (deterministic under normal scheduling), and the fallback (threads
    that find no partner sums at once sum the partner's half themselves, PAIR_SPIN = 0)
    agrees to rounding. (At 16384 in bf16 the Gluon backward runs where it can: off here.)"""
    import membound.kernels.add_norm_config as C

    monkeypatch.setattr(C, "BWD_GLUON", None)
    assert bwd_config(4096, 16384).pair
    rows = _wide_rows(3)

    def run():
        return _wide_bwd(*rows)

    first, again = run(), run()
    monkeypatch.setattr(K, "PAIR_SPIN", 0)
    alone = run()
    for a, b, c in zip(first, again, alone, strict=True):
        if a is not None:
            assert torch.equal(a, b)
            torch.testing.assert_close(c.float(), a.float(), rtol=1e-2, atol=1e-2)


def _bwd_plans_used():
    """The backward plans made since `_PLANS` was last cleared."""
    return [bp for key, bp in K._PLANS.items() if key[0] == "bwd"]


@pytest.mark.gpu
@pytest.mark.parametrize(
    "M,N,dtype,is_rms,p,parts",
    [(2048, 16384, torch.bfloat16, False, 0.1, ("residual", "weight", "bias")),
     (300, 16384, torch.bfloat16, True, 0.1, ("residual", "weight")),
     (256, 16384, torch.float16, False, 0.1, ("residual",)),
     (1000, 12000, torch.bfloat16, False, 0.0, ("residual", "weight", "bias")),
     (33, 9000, torch.float16, False, 0.0, ("weight", "bias"))],
)  # fmt: skip
def test_gpu_gluon_backward_against_float64(M, N, dtype, is_rms, p, parts):
    """The Gluon backward (16-bit rows of 16384, and of 9000-16383 without dropout; no
    pre-bias): every gradient against float64, its dropout mask the forward's (the reference
    applies the materialised mask), rows that do not fill the 16384 columns (masked), row
    strides not divisible by 16 (9000), fewer rows than SMs, no weight or bias."""
    from membound.kernels import add_norm_gluon

    if not add_norm_gluon.usable(torch.device("cuda"), 16384):
        pytest.skip("no Gluon or too little shared memory on this GPU")
    K._PLANS.clear()
    _run_case(M, N, dtype, is_rms, parts, p=p, dev="cuda")
    assert [bp.gluon for bp in _bwd_plans_used()] == [True]


@pytest.mark.gpu
def test_gpu_gluon_backward_agrees_with_the_pair_kernel(monkeypatch):
    """Same inputs through the Gluon and the SM-pair backward: the same dropped elements,
    the same gradients to rounding; and rows that start unaligned take the pair kernel."""
    import membound.kernels.add_norm_config as C

    s, dy, w, mean, rstd = _wide_rows(4)
    M, N = s.shape

    def run(dy=dy, s=s):
        out = _wide_bwd(s, dy, w, mean, rstd)
        return out, [bp.gluon for bp in _bwd_plans_used()]

    glu, used = run()
    if used != [True]:
        pytest.skip("the Gluon backward is not usable here")
    monkeypatch.setattr(C, "BWD_GLUON", None)
    pair, used = run()
    assert used == [False]
    assert torch.equal(glu[0] == 0, pair[0] == 0)  # dx: the same mask
    for a, b in zip(glu, pair, strict=True):
        if a is not None:
            torch.testing.assert_close(a.float(), b.float(), rtol=2e-2, atol=2e-2)
    monkeypatch.setattr(C, "BWD_GLUON", 16)
    # one element in: every row starts 2 bytes past a 16-byte boundary
    flat_s, flat_dy = (t.new_empty(M * N + 8) for t in (s, dy))
    s_u, dy_u = (f[1 : 1 + M * N].view(M, N) for f in (flat_s, flat_dy))
    s_u.copy_(s)
    dy_u.copy_(dy)
    unaligned, _ = run(dy_u, s_u)
    assert [bp.gluon for bp in _bwd_plans_used()] == [True, False]
    assert torch.equal(unaligned[0], pair[0])


@pytest.mark.gpu
def test_gpu_keep_rate_and_masks_at_full_size():
    M, N, p = 32768, 4096, 0.1
    keep = K.dropout_mask(11, M, N, p, "cuda")
    rate = keep.float().mean().item()
    assert abs(rate - (1 - p)) <= 5 * math.sqrt(p * (1 - p) / keep.numel())
    # per-column and per-row rates: no stripes from the 4-values-per-call interleave
    cols = keep.float().mean(0)
    assert (cols - (1 - p)).abs().max() <= 6 * math.sqrt(p * (1 - p) / M)
    # strictly positive x: s == 0 exactly where dropped (randn + 4 in bf16 can round to 0,
    # which failed run 1 at 32768 x 4096)
    x = torch.rand(M, N, device="cuda", dtype=torch.bfloat16) + 1
    _, s, mean, rstd = K.add_norm_fwd(x, None, None, None, None, eps=1e-5, is_rms=False,
                                    dropout_p=p, seed=11)  # fmt: skip
    assert torch.equal(s == 0, ~keep)
    dx = K.add_norm_bwd(torch.randn_like(x), None, s, mean, rstd, None, is_rms=False,
                      dropout_p=p, seed=11)[0]  # fmt: skip
    assert torch.equal(dx == 0, ~keep)


@pytest.mark.gpu
def test_gpu_seeded_module_reproducible_and_compiles():
    from membound.nn import FusedAddLayerNorm

    m = FusedAddLayerNorm(4096, dropout_p=0.1, prenorm=True, device="cuda", dtype=torch.bfloat16)
    # above EAGER_MAX_ELEMS (2**23): the kernels, whose seed comes from torch's CPU generator
    # (small inputs run plain PyTorch ops, where compiled dropout draws differently, as in
    # PyTorch itself)
    x = torch.randn(4, 520, 4096, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    r = torch.randn_like(x)
    torch.manual_seed(0)
    a, _ = m(x, r)
    torch.manual_seed(0)
    b, _ = m(x, r)
    assert torch.equal(a, b)
    torch._dynamo.reset()
    f = torch.compile(lambda x, r: m(x, r), fullgraph=True)
    f(x, r)  # compile first: compilation must not shift the generator the op draws from
    torch.manual_seed(0)
    y, s = f(x, r)
    assert torch.equal(y, a)
    (y.float().sum() + s.float().sum()).backward()
    assert x.grad is not None and m.weight.grad is not None


@pytest.mark.gpu
def test_gpu_small_inputs_take_plain_eager_ops():
    from membound.kernels import _launch
    from membound.nn.functional import add_norm

    x, r = (torch.randn(8, 1024, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    w = torch.randn(1024, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    before = dict(_launch.stats)
    torch.manual_seed(3)
    y, s = add_norm(x, w, None, residual=r, dropout_p=0.5, prenorm=True)
    torch.manual_seed(3)
    y2, _ = add_norm(x, w, None, residual=r, dropout_p=0.5, prenorm=True)
    assert torch.equal(y, y2) and _launch.stats == before  # no Triton launch
    assert type(y.grad_fn).__name__ != "AddNormFunctionBackward"  # plain autograd ops
    kept = s != r  # dropped elements leave s == residual exactly
    assert 0.4 < kept.float().mean().item() < 0.6
    (gw,) = torch.autograd.grad(y.float().sum(), (w,))
    assert torch.isfinite(gw).all()


@pytest.mark.gpu
def test_gpu_small_inputs_without_grad_take_the_kernels():
    """Inference: the size rule's threshold is lower without grad (EAGER_MAX_ELEMS_NOGRAD):
    from 2**20 elements the fused kernel runs (one launch, no autograd), with the values of
    the eager-ops path; below it the eager ops."""
    from membound.kernels import _launch
    from membound.nn import _ops
    from membound.nn.functional import add_norm, eager_add_norm

    assert _ops.EAGER_MAX_ELEMS_NOGRAD < 256 * 4096 <= _ops.EAGER_MAX_ELEMS
    x, r = (torch.randn(256, 4096, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    w, b = (torch.randn(4096, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    calls = _launch.stats["direct"] + _launch.stats["normal"]
    with torch.no_grad():
        y = add_norm(x, w, b, residual=r, norm="rms")
        y_ref, _ = eager_add_norm(x, w, b, r, None, 0.0, True, 1e-5, x.dtype, x.dtype)
    assert _launch.stats["direct"] + _launch.stats["normal"] == calls + 1
    torch.testing.assert_close(y.float(), y_ref.float(), rtol=2e-2, atol=2e-2)
    with torch.no_grad():
        add_norm(x[:8], w, b, residual=r[:8], norm="rms")  # 32768 elements: eager ops
    assert _launch.stats["direct"] + _launch.stats["normal"] == calls + 1


@pytest.mark.gpu
def test_gpu_strided_rows_and_fp16_large_values():
    from membound.nn.functional import add_norm

    base = (torch.randn(4096, 8192, device="cuda") * 3e4).clamp(-6e4, 6e4).half()
    x = base[:, :4096]  # row stride 8192: no copy
    y = add_norm(x, eps=1e-5)
    ref = torch.nn.functional.layer_norm(x.float(), (4096,))
    assert torch.isfinite(y).all()
    assert (y.float() - ref).abs().max() < 2e-2
