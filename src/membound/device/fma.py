"""The fp32 vector (non-tensor-core) FMA rate, from a Triton kernel that is all FMAs.

Why a kernel of its own: a chain of PyTorch elementwise ops (`addcmul_`, ...) reads and
writes every element per op, so it measures memory bandwidth, not the FMA pipe. Here each
element is loaded once, then goes through `CHAINS` independent FMA chains for
`ITERS * UNROLL` steps in registers, and is stored once: ~2048 FMAs per 8 bytes moved puts
the kernel far right of any ridge. Independent chains (and several elements per thread) give
the scheduler enough instruction-level parallelism to hide the FMA latency. The multiplier
and addend are runtime scalars so the compiler cannot fold the chains away.

Imported only by the measurement, never at `membound` import (it imports Triton).
"""

from __future__ import annotations

import triton
import triton.language as tl

CHAINS = 4
UNROLL = 16


@triton.jit
def _fma_chain_kernel(X, Y, N, s, t, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(X + offs, mask=mask, other=0.0)
    a = x
    b = x + 1.0
    c = x + 2.0
    d = x + 3.0
    for _ in range(ITERS):
        # a static inner unroll keeps loop overhead (counter, branch) ~3% of the issue slots
        for _u in tl.static_range(16):
            a = a * s + t
            b = b * s + t
            c = c * s + t
            d = d * s + t
    tl.store(Y + offs, a + b + c + d, mask=mask)


def fma_chains(x, iters: int = 32, block: int = 1024):
    """Run the kernel on fp32 CUDA tensor `x`; returns (output, FLOPs the launch performs)."""
    import torch

    y = torch.empty_like(x)
    n = x.numel()
    grid = (triton.cdiv(n, block),)
    # s < 1 and t small keep every chain bounded (converges to t / (1 - s)): no inf/nan.
    _fma_chain_kernel[grid](x, y, n, 0.9999, 1e-4, ITERS=iters, BLOCK=block, num_warps=4)
    flops = 2 * CHAINS * UNROLL * iters * n
    return y, flops
