"""The Gluon backward's compile-time knobs at 32768 x N bf16 (residual, weight, bias, dropout 0.1
and 0), by GPU time, each checked against the pair kernel's outputs.

The default plan, then its constexprs changed one at a time (db_flip: the dbias partials in
registers instead of shared memory or back; masked: column masks kept at N = 16384;
noswizzle: the dbias partials in shared memory unswizzled) and 8/32 warps; the pair kernel
alongside. Rows: hidden, dropout, variant, ms, fraction_of_copy (4 tensors).

    PYTHONPATH=src python benchmarks/add_norm/gluon.py --run 56
"""

from __future__ import annotations

import dataclasses

import torch
from _common import (
    M,
    P,
    backward,
    fused_problem,
    gpu_ms,
    parser,
    saved_forward,
    start,
    time_checked,
    work,
)


def gluon_knobs(csv, copy_bw, widths=(16384, 12288)):
    from membound.kernels.add_norm import bwd_config
    from membound.kernels.add_norm.plan import PLANNER

    for N in widths:
        x, r, dy, w, b = fused_problem(N)
        s, mean, rstd = saved_forward(x, r, w, b)
        cost = work(M, N, 2, 4, "bwd")
        for p in (P, 0.0):
            ref = backward(dy, s, mean, rstd, w, p, bwd_config(M, N))()
            PLANNER.plans.clear()
            bwd = backward(dy, s, mean, rstd, w, p)
            bwd()
            keys = [k for k, v in PLANNER.plans.items() if k[0] == "bwd" and v.gluon]
            if not keys:
                print(f"  gluon N={N} p={p}: not used here")
                continue
            base = PLANNER.plans[keys[0]]
            pair_cfg = bwd_config(M, N)
            pair_ms = gpu_ms(backward(dy, s, mean, rstd, w, p, pair_cfg))
            frac = cost["bytes"] / pair_ms / 1e-3 / copy_bw
            print(f"  gluon N={N:<6} p={p:<4} {'pair':<12}{pair_ms:8.4f} ms {frac:6.3f}")
            row = dict(part="gluon_knobs", rows=M, hidden=N, dtype="bfloat16", dropout=p)
            csv.add(**row, variant="pair", ms=round(pair_ms, 4), fraction_of_copy=round(frac, 3),
                    **cost)  # fmt: skip
            dbs = base.row.constexprs["DB_SMEM"]
            knobs = {"default": ({}, None), "db_flip": ({"DB_SMEM": not dbs}, None),
                     "masked": ({"EVEN": False}, None), "w8": ({}, 8), "w32": ({}, 32),
                     "noswizzle": ({"DB_SWIZZLE": False}, None)}  # fmt: skip
            if not dbs:
                knobs.pop("noswizzle")
            for name, (cx, warps) in knobs.items():
                warps = warps or base.row.num_warps
                cx = {**base.row.constexprs, **cx, "NUM_WARPS": warps}
                plan = dataclasses.replace(base.row, key=base.row.key + (name,), constexprs=cx,
                                           num_warps=warps)  # fmt: skip
                # the cached plan swapped for this variant's: the launcher runs it as is
                PLANNER.plans[keys[0]] = dataclasses.replace(base, row=plan)
                time_checked(csv, copy_bw, bwd, ref, f"  gluon N={N:<6} p={p:<4} {name:<12}",
                             **row, variant=name, **cost)  # fmt: skip
            PLANNER.plans.clear()
        del x, r, dy, s
        torch.cuda.empty_cache()


def main(argv=None) -> int:
    args = parser(__doc__, "gluon").parse_args(argv)
    began = start(args)
    if began is not None:
        gluon_knobs(*began)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
