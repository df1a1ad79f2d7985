"""Rows wider than a tile: the chunked kernels (`chunked.py`) and the split backward, whose row
pass writes dx only and whose parameter pass (`partials.py`) sums dweight, dbias, dpre_bias."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from membound.kernels.add_norm import LaunchConfig, bwd_config, fwd_config  # noqa: E402

from .cases import ALL, run_case  # noqa: E402


@pytest.mark.parametrize("is_rms", [False, True], ids=["layer", "rms"])
@pytest.mark.parametrize("p", [0.0, 0.3])
def test_chunked_kernels_match(is_rms, p):
    """Force the chunked kernels with small chunks (odd width, so the last chunk is partial)
    and a persistent grid smaller than the row count."""
    cfg = LaunchConfig(block_m=1, block_n=64, num_warps=1, chunked=True, programs_per_sm=1)
    keep, _ = run_case(5, 341, torch.float32, is_rms, ALL, p, fwd_cfg=cfg, bwd_cfg=cfg)
    if p:  # the mask does not depend on the chunking
        keep_tiled, _ = run_case(5, 341, torch.float32, is_rms, ALL, p)
        assert torch.equal(keep, keep_tiled)


@pytest.mark.parametrize("is_rms", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_split_parameter_backward(dtype, is_rms):
    """split_params: the row kernel writes dx/dres only, a second pass sums dweight, dbias
    and dpre_bias over row blocks (19 rows over 8 row programs: uneven, and some empty)."""
    cfg = LaunchConfig(1, 64, 1, False, programs_per_sm=0, split_params=True)
    run_case(19, 41, dtype, is_rms, ALL, 0.2, bwd_cfg=cfg)
    run_case(3, 7, dtype, is_rms, ("weight",), 0.0, bwd_cfg=cfg)
    # the row pass may be the chunked kernel (two passes over 16-wide chunks, no accumulators)
    chunked = LaunchConfig(1, 16, 1, True, programs_per_sm=1, split_params=True)
    run_case(19, 41, dtype, is_rms, ALL, 0.2, bwd_cfg=chunked)


@pytest.mark.parametrize("is_rms", [False, True], ids=["layer", "rms"])
def test_wide_tile_forward_and_split_backward(is_rms):
    """N = 9000 -> 16384-wide tiles by default: the forward's one tile re-reads weight/bias
    per tile instead of holding them; the backward splits off the parameter pass (the
    default above 16384, forced here)."""
    assert fwd_config(3, 9000).block_n == 16384 and not fwd_config(3, 9000).chunked
    split = bwd_config(3, 16385)
    assert split.split_params and split.chunked
    run_case(3, 9000, torch.float32, is_rms, ALL, p=0.2, bwd_cfg=split)
