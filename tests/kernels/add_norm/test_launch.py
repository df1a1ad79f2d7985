"""`add_norm_fwd` / `add_norm_bwd` against a float64 reference (CPU: Triton interpreter; GPU:
marked): every output and gradient, every optional part, odd and round shapes, each dtype, the
launch shapes a config can ask for, and inputs that stress the math."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from membound.kernels.add_norm import LaunchConfig, add_norm_bwd, add_norm_fwd  # noqa: E402
from membound.kernels.add_norm.config import LIGHT_FWD, LIGHT_FWD_RMS, fwd_config  # noqa: E402

from .cases import ALL, DEV, run_case  # noqa: E402

SHAPES = [(9, 41), (3, 341), (2, 4231), (1, 1), (64, 128)]


@pytest.mark.parametrize("M,N", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("is_rms", [False, True], ids=["layer", "rms"])
def test_all_parts_with_dropout(M, N, dtype, is_rms):
    run_case(M, N, dtype, is_rms, ALL, p=0.25)


@pytest.mark.parametrize(
    "parts",
    [(), ("residual",), ("pre_bias",), ("weight",), ("bias",), ("weight", "bias"), ALL],
    ids=lambda p: "+".join(p) or "none",
)
@pytest.mark.parametrize("is_rms", [False, True], ids=["layer", "rms"])
def test_each_optional_part_without_dropout(parts, is_rms):
    run_case(9, 41, torch.float32, is_rms, parts, p=0.0)


@pytest.mark.parametrize("N", [1500, 3000, 5000, 9000])
def test_plain_norms_take_their_own_shapes(N):
    """x in, y out (no residual, no dropout): RMSNorm and LayerNorm use their own launch
    shapes where they have one (`LIGHT_FWD_RMS`, `LIGHT_FWD`), else the fused op's; same
    results."""
    bn = 1 << (N - 1).bit_length()
    for table, rms in ((LIGHT_FWD, False), (LIGHT_FWD_RMS, True)):
        assert fwd_config(2, N, 2, 2, rms) == table.get(bn, fwd_config(2, N))
    assert bn in LIGHT_FWD or bn in LIGHT_FWD_RMS  # each width here runs a plain shape
    run_case(2, N, torch.bfloat16, True, ("weight",), 0.0)
    run_case(2, N, torch.float16, False, ("weight", "bias"), 0.0)


def test_persistent_forward_grid_and_multi_row_tiles():
    cfg = LaunchConfig(block_m=4, block_n=64, num_warps=1, chunked=False, programs_per_sm=1)
    run_case(19, 41, torch.float32, False, ALL, 0.2, fwd_cfg=cfg, bwd_cfg=cfg)


@pytest.mark.parametrize("is_rms", [False, True])
@pytest.mark.parametrize("block_m", [1, 4])
def test_prefetching_persistent_kernels(block_m, is_rms):
    """PREFETCH: each program loads its next tile before computing the current one; 23 rows
    over 3 programs leave a partial last tile and prefetches past the end (masked)."""
    cfg = LaunchConfig(block_m, 64, 1, False, programs_per_sm=1, prefetch=True)
    # the interpreter's grid is 4 programs per "SM" count: cap it at 3 through the rows
    run_case(23, 41, torch.bfloat16, is_rms, ALL, 0.2, fwd_cfg=cfg, bwd_cfg=cfg)
    run_case(2, 41, torch.float32, is_rms, ALL, 0.0, fwd_cfg=cfg, bwd_cfg=cfg)


def test_identical_seeds_identical_results():
    x = torch.randn(9, 41, device=DEV)
    r = torch.randn(9, 41, device=DEV)
    a = add_norm_fwd(x, None, None, r, None, eps=1e-5, is_rms=False, dropout_p=0.5, seed=3)
    b = add_norm_fwd(x, None, None, r, None, eps=1e-5, is_rms=False, dropout_p=0.5, seed=3)
    c = add_norm_fwd(x, None, None, r, None, eps=1e-5, is_rms=False, dropout_p=0.5, seed=4)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[1], c[1])


@pytest.mark.parametrize("is_rms", [False, True], ids=["layer", "rms"])
def test_zero_variance_rows_stay_finite(is_rms):
    x = torch.full((4, 41), 2.5, device=DEV)
    x[1] = 0.0
    w = torch.randn(41, device=DEV)
    y, _, mean, rstd = add_norm_fwd(x, w, None, None, None, eps=1e-5, is_rms=is_rms, store_s=False)
    assert torch.isfinite(y).all() and torch.isfinite(rstd).all()
    if not is_rms:
        assert y.abs().max() == 0
    dx, *_ = add_norm_bwd(torch.randn_like(x), None, x, mean, rstd, w, is_rms=is_rms)
    assert torch.isfinite(dx).all()


def test_fp16_large_magnitudes_do_not_overflow():
    # 3e4 fits fp16 (max 65504) but its square and any sum of a few do not: fp32 math must hold
    x = (torch.randn(6, 341, device=DEV) * 3e4).clamp(-6e4, 6e4).half()
    r = (torch.randn(6, 341, device=DEV) * 1e3).half()
    y, s, mean, rstd = add_norm_fwd(x, None, None, r, None, eps=1e-5, is_rms=False)
    assert torch.isfinite(y).all() and torch.isfinite(s).all()
    ref = torch.nn.functional.layer_norm((x.float() + r.float()), (341,))
    assert (y.float() - ref).abs().max() < 2e-2
    dx, *_ = add_norm_bwd(torch.randn_like(y), None, s, mean, rstd, None, is_rms=False)
    assert torch.isfinite(dx).all()


def test_strided_rows_without_copy():
    base = torch.randn(6, 100, device=DEV)
    x = base[:, 10:51]  # row stride 100, 41 wide
    r = torch.randn(12, 41, device=DEV)[::2]  # row stride 82
    y, s, *_ = add_norm_fwd(x, None, None, r, None, eps=1e-5, is_rms=False)
    ref = torch.nn.functional.layer_norm(x + r, (41,), eps=1e-5)
    torch.testing.assert_close(y, ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(s, x + r)


# ----------------------------------------------------------------------------- GPU, full size


@pytest.mark.gpu
@pytest.mark.parametrize("M,N", [(32768, 1024), (2048, 16384), (64, 65536), (1000, 4231)])
@pytest.mark.parametrize(
    "dtype,is_rms",
    [(torch.float32, False), (torch.bfloat16, False), (torch.float16, True)],
)
def test_gpu_full_size_against_float64(M, N, dtype, is_rms):
    run_case(M, N, dtype, is_rms, ALL, p=0.1, dev="cuda")
