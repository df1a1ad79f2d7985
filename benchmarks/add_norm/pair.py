"""The wide-row backwards at 32768 x 16384 by GPU time, bf16 and fp32, dropout 0.1 and 0.

DEFAULT: no explicit config (the Gluon kernel for 16-bit rows where it runs, else the pair
kernel); `pair_w16_p1`: the SM-pair kernel (2 programs per row exchanging the row sums);
`split`: the two-pass backward (row kernel without accumulators + parameter pass). Outputs are
checked against the pair kernel's. Rows: dtype, hidden, dropout, variant, ms, fraction_of_copy
(4 tensors: dy, s read; dx, dresidual written).

    PYTHONPATH=src python benchmarks/add_norm/pair.py --run 56
"""

from __future__ import annotations

import torch
from _common import M, P, backward, fused_problem, parser, saved_forward, start, time_checked, work


def pair_vs_split(csv, copy_bw, N=16384):
    from membound.kernels.add_norm import LaunchConfig, bwd_config

    for dtype in (torch.bfloat16, torch.float32):
        x, r, dy, w, b = fused_problem(N, dtype)
        s, mean, rstd = saved_forward(x, r, w, b)
        cost = work(M, N, dy.element_size(), 4, "bwd")
        default = bwd_config(M, N)
        # DEFAULT: no explicit config (the Gluon kernel where it runs, else the default's)
        variants = {"DEFAULT": None, "pair_w16_p1": LaunchConfig(1, N, 16, False, 1, pair=True),
                    "split": bwd_config(M, N, None)}  # fmt: skip
        for p in (P, 0.0):
            ref = backward(dy, s, mean, rstd, w, p, default)()
            for name, cfg in variants.items():
                time_checked(csv, copy_bw, backward(dy, s, mean, rstd, w, p, cfg), ref,
                             f"  bwd {str(dtype)[6:]:<9} p={p:<4} {name:<14}",
                             part="pair_vs_split", dtype=str(dtype)[6:], rows=M, hidden=N,
                             dropout=p, variant=name, **cost)  # fmt: skip
        del x, r, dy, s
        torch.cuda.empty_cache()


def main(argv=None) -> int:
    args = parser(__doc__, "pair").parse_args(argv)
    began = start(args)
    if began is not None:
        pair_vs_split(*began)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
