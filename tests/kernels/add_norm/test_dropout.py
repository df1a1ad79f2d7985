"""The dropout mask: a pure function of (seed, row, column) through Philox (`_jit._dropout_keep`),
the same in the forward and the backward, bit for bit the independent PyTorch Philox of
`ref.dropout_keep_philox`, at the keep rate asked for."""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("triton")

from membound.kernels.add_norm import add_norm_bwd, add_norm_fwd, dropout_mask  # noqa: E402
from membound.kernels.add_norm.ref import dropout_keep_philox  # noqa: E402

from .cases import DEV  # noqa: E402


def test_dropout_keep_rate_seeds_and_backward_mask():
    M, N, p = 64, 1000, 0.3
    keep = dropout_mask(7, M, N, p, DEV)
    n = keep.numel()
    rate = keep.float().mean().item()
    assert abs(rate - (1 - p)) <= 5 * math.sqrt(p * (1 - p) / n)
    assert torch.equal(keep, dropout_mask(7, M, N, p, DEV))
    assert not torch.equal(keep, dropout_mask(8, M, N, p, DEV))
    assert dropout_mask(7, M, N, 1.0, DEV).sum() == 0
    assert dropout_mask(7, M, N, 0.0, DEV).all()
    # the forward used this mask (zeros exactly where dropped), and so did the backward
    x = torch.rand(M, N, device=DEV) + 1.0  # no exact zeros in x + 0
    _, s, mean, rstd = add_norm_fwd(x, None, None, None, None, eps=1e-5, is_rms=False,
                                    dropout_p=p, seed=7)  # fmt: skip
    assert torch.equal(s == 0, ~keep)
    torch.testing.assert_close(s[keep], x[keep] / (1 - p))
    dx = add_norm_bwd(torch.randn(M, N, device=DEV), None, s, mean, rstd, None,
                      is_rms=False, dropout_p=p, seed=7)[0]  # fmt: skip
    assert torch.equal(dx == 0, ~keep)


@pytest.mark.parametrize(
    "seed,M,N,p", [(7, 3, 41, 0.3), (2**40 + 123, 5, 300, 0.5), (3, 1, 1, 0.1), (9, 2, 16, 0.9)]
)
def test_kernel_mask_is_the_philox_reference_stream(seed, M, N, p):
    """An independent PyTorch Philox-4x32-10 gives the kernels' mask bit for bit: one call
    per 8 columns, 16-bit slices, the documented interleave."""
    assert torch.equal(dropout_mask(seed, M, N, p, DEV), dropout_keep_philox(seed, M, N, p))


@pytest.mark.gpu
def test_gpu_keep_rate_and_masks_at_full_size():
    M, N, p = 32768, 4096, 0.1
    keep = dropout_mask(11, M, N, p, "cuda")
    rate = keep.float().mean().item()
    assert abs(rate - (1 - p)) <= 5 * math.sqrt(p * (1 - p) / keep.numel())
    # per-column and per-row rates: no stripes from the 4-values-per-call interleave
    cols = keep.float().mean(0)
    assert (cols - (1 - p)).abs().max() <= 6 * math.sqrt(p * (1 - p) / M)
    # strictly positive x: s == 0 exactly where dropped (randn + 4 in bf16 can round to 0,
    # which failed run 1 at 32768 x 4096)
    x = torch.rand(M, N, device="cuda", dtype=torch.bfloat16) + 1
    _, s, mean, rstd = add_norm_fwd(x, None, None, None, None, eps=1e-5, is_rms=False,
                                    dropout_p=p, seed=11)  # fmt: skip
    assert torch.equal(s == 0, ~keep)
    dx = add_norm_bwd(torch.randn_like(x), None, s, mean, rstd, None, is_rms=False,
                      dropout_p=p, seed=11)[0]  # fmt: skip
    assert torch.equal(dx == 0, ~keep)
