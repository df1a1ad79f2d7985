"""Inference (no grad) at small sizes: eager's ops, the fused kernels (what add_norm runs without
grad from 2**20 elements on) and the eager-ops path (what the size rule runs with grad).

By GPU time (CUDA-graph replay) and by do_bench (host in the loop: best of 3 interleaved
rounds, these shapes are host-bound). Rows: rows, hidden, variant, gpu_ms, bench_ms,
fraction_of_copy (by do_bench, 4 tensors).

    PYTHONPATH=src python benchmarks/add_norm/nograd.py --run 56
"""

from __future__ import annotations

import torch
from _common import P, bench_ms, eager_fused, gpu_ms, parser, start, work

SHAPES = ((2048, 4096), (256, 4096), (64, 1024), (8, 1024))


def nograd_small(csv, copy_bw, shapes=SHAPES):
    from membound.nn.functional import add_norm, eager_add_norm

    print(f"{'shape':<11}{'variant':<12}{'gpu ms':>8}{'bench ms':>10}{'frac(bench)':>12}")
    for m, n in shapes:
        x, r = (torch.randn(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        w, b = (torch.randn(n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        a = (x, r, w, b)
        fns = {
            "eager": lambda a=a: eager_fused(*a, P),
            "membound": lambda a=a: add_norm(
                a[0], a[2], a[3], residual=a[1], dropout_p=P, prenorm=True
            ),  # fmt: skip
            "eager_path": lambda a=a: eager_add_norm(
                a[0], a[2], a[3], a[1], None, P, False, 1e-5, a[0].dtype, a[0].dtype
            ),  # fmt: skip
        }
        cost = work(m, n, 2, 4, "fwd")
        best = {}
        with torch.no_grad():
            gpu = {k: gpu_ms(f) for k, f in fns.items()}
            for _ in range(3):
                for k, f in fns.items():
                    ms = bench_ms(f, warmup_ms=3, rep_ms=10)
                    best[k] = min(best.get(k, ms), ms)
        for k in fns:
            frac = cost["bytes"] / (best[k] / 1e3) / copy_bw
            print(f"{m}x{n:<6}{k:<12}{gpu[k]:8.4f}{best[k]:10.4f}{frac:12.3f}", flush=True)
            csv.add(part="nograd_small", rows=m, hidden=n, dtype="bfloat16", variant=k,
                    gpu_ms=round(gpu[k], 4), bench_ms=round(best[k], 4),
                    fraction_of_copy=round(frac, 3), **cost)  # fmt: skip


def main(argv=None) -> int:
    args = parser(__doc__, "nograd").parse_args(argv)
    began = start(args)
    if began is not None:
        nograd_small(*began)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
