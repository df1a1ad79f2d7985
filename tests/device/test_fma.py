"""The FMA-chain kernel computes what it claims (runs under Triton's interpreter on CPU)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")


def test_fma_chains_matches_reference_and_counts_flops():
    from membound.device.fma import CHAINS, UNROLL, fma_chains

    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.rand(3000, device=device)  # not a multiple of the block: exercises the mask
    y, flops = fma_chains(x, iters=2)
    a = [x.double() + k for k in range(CHAINS)]
    for _ in range(2 * UNROLL):
        a = [v * 0.9999 + 1e-4 for v in a]
    torch.testing.assert_close(y.double(), sum(a), rtol=1e-5, atol=1e-5)
    assert flops == 2 * CHAINS * UNROLL * 2 * 3000
