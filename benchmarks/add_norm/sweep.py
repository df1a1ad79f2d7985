"""add_norm launch-config variants by GPU time alone, per width and direction.

Forward and backward variants at 32768 rows x H (bf16, residual + dropout 0.1, bf16 weight and
bias), and the plain LayerNorm / RMSNorm forward (x in, y out), timed by CUDA-graph replay with
L2 flushed (kernel time without host overhead, so configs are compared on what they move).
Stage 1 sweeps rows per tile x warps x programs per SM; stage 2 re-times the best three with
PREFETCH (next tile loaded while this one computes) and without dropout. Every variant's
outputs are checked against the default config's; a wrong one is recorded as WRONG and never
ranks. Rows: direction, hidden, variant, ms, fraction_of_copy, config.

    PYTHONPATH=src python benchmarks/add_norm/sweep.py --fwd-widths 4096 --bwd-widths 0 \\
        --rms-widths 8192 --only bm1,bm2 --run 56
"""

from __future__ import annotations

import time
from dataclasses import replace

import torch
from _common import (
    M,
    P,
    backward,
    fused_problem,
    gpu_ms,
    parser,
    same,
    saved_forward,
    start,
    work,
)


def fwd_candidates(N) -> dict:
    from membound.kernels.add_norm import LaunchConfig

    bn = max(8, 1 << (N - 1).bit_length())
    out = {}
    if bn <= 8192:
        for bm in (1, 2, 4, 8):
            if bm * bn > 8192:
                continue
            for w in (4, 8, 16, 32):
                per = bm * bn // (32 * w)
                if not 4 <= per <= 32:
                    continue
                for pps in (0, 2, 4):
                    out[f"bm{bm}_w{w}_p{pps}"] = LaunchConfig(bm, bn, w, False, pps)
    if N >= 8192:
        chunks = [(4096, 8, 8), (4096, 8, 4), (4096, 16, 4), (2048, 8, 8), (8192, 16, 2)]
        chunks += [(2048, 4, 16), (1024, 4, 16), (2048, 16, 4), (1024, 8, 8)]
        for cn, w, pps in chunks:
            out[f"chunk{cn}_w{w}_p{pps}"] = LaunchConfig(1, cn, w, True, pps)
    if bn >= 16384:  # one tile of the whole row (16 or 32 elements per thread)
        for w, pps in ((32, 1), (32, 2), (32, 0), (16, 0), (16, 1), (16, 2)):
            out[f"one_w{w}_p{pps}"] = LaunchConfig(1, bn, w, False, pps)
    return out


def bwd_candidates(N) -> dict:
    from membound.kernels.add_norm import LaunchConfig

    bn = max(8, 1 << (N - 1).bit_length())
    out = {}
    for bm in (1, 2, 4):
        if bm * bn > 16384:
            continue
        for w in (4, 8, 16, 32):
            per = bm * bn // (32 * w)
            if not 8 <= per <= 64:
                continue
            for pps in (1, 2, 4, 8):
                if w * pps > 32:
                    continue
                out[f"bm{bm}_w{w}_p{pps}"] = LaunchConfig(bm, bn, w, False, pps)
    if bn >= 16384:  # the fused chunked kernel: its partial rows read-modify-written in L2
        for cn, w, pps in ((4096, 8, 1), (8192, 16, 1), (2048, 8, 1), (4096, 16, 1),
                           (4096, 8, 2), (8192, 16, 2)):  # fmt: skip
            out[f"rmwchunk{cn}_w{w}_p{pps}"] = LaunchConfig(1, cn, w, True, pps)
    if bn >= 16384:  # split, with the chunked kernel (two passes per row) as the row pass
        for cn, w, pps in ((4096, 8, 1), (4096, 8, 2), (4096, 8, 4), (4096, 16, 1), (4096, 16, 2),
                           (2048, 8, 2), (2048, 8, 4), (2048, 4, 4), (2048, 4, 8), (8192, 16, 1),
                           (8192, 16, 2)):  # fmt: skip
            out[f"splitchunk{cn}_w{w}_p{pps}"] = LaunchConfig(
                1, cn, w, True, pps, split_params=True
            )
    if bn >= 16384:  # split: no accumulators in the row kernel, a second parameter pass
        for w, pps, pf in ((32, 0, False), (16, 0, False), (32, 2, True), (16, 2, True),
                           (32, 1, True)):  # fmt: skip
            out[f"split_w{w}_p{pps}{'_pf' if pf else ''}"] = LaunchConfig(
                1, bn, w, False, pps, prefetch=pf, split_params=True
            )
    if bn >= 16384:  # fused, two programs (SMs) per row exchanging the row sums
        for w, pps in ((16, 1), (32, 1), (8, 2)):
            out[f"pair_w{w}_p{pps}"] = LaunchConfig(1, bn, w, False, pps, pair=True)
    return out


def sweep_width(csv, copy_bw, N, directions, only=()):
    """Time the variants of each direction in `directions` (fwd, bwd, ln-fwd, rms-fwd) at N;
    `only`: variant name prefixes (empty: all)."""
    from membound.kernels.add_norm import add_norm_fwd, bwd_config, fwd_config

    x, r, dy, w, b = fused_problem(N)
    s, mean, rstd = saved_forward(x, r, w, b)

    def fwd(cfg, p=P):
        return lambda: add_norm_fwd(
            x, w, b, r, None, eps=1e-5, is_rms=False, dropout_p=p, seed=1, config=cfg
        )

    def bwd(cfg, p=P):
        return backward(dy, s, mean, rstd, w, p, cfg)

    def ln(cfg, p=0.0):  # LayerNorm alone: reads x, writes y (2 tensors)
        return lambda: add_norm_fwd(
            x, w, b, None, None, eps=1e-5, is_rms=False, store_s=False, config=cfg
        )

    def rms(cfg, p=0.0):  # RMSNorm alone (weight, no bias): reads x, writes y
        return lambda: add_norm_fwd(
            x, w, None, None, None, eps=1e-5, is_rms=True, store_s=False, config=cfg
        )

    table = {  # direction: (call maker, candidates, default, row-sized tensors moved)
        "fwd": (fwd, fwd_candidates, fwd_config(M, N), 4),
        "bwd": (bwd, bwd_candidates, bwd_config(M, N), 4),
        "ln-fwd": (ln, fwd_candidates, fwd_config(M, N, 2, 2), 2),
        "rms-fwd": (rms, fwd_candidates, fwd_config(M, N, 2, 2, True), 2),
    }
    for direction in directions:
        make, candidates, default, tensors = table[direction]
        cost = work(M, N, 2, tensors, "bwd" if direction == "bwd" else "fwd")
        nbytes = cost["bytes"]
        t_start = time.time()
        res = {}
        refs = {p: make(default, p)() for p in (P, 0.0)}

        def time_one(name, cfg, p=P, direction=direction, make=make, res=res, refs=refs,
                     cost=cost):  # fmt: skip
            try:
                ok = same(make(cfg, p)(), refs[p])
                ms = gpu_ms(make(cfg, p))
            except Exception as e:  # noqa: BLE001 - one variant failing must not stop
                print(f"  {direction} H={N} {name}: {type(e).__name__}: {str(e)[:100]}")
                return
            row = dict(part="sweep", direction=direction, rows=M, hidden=N, dtype="bfloat16")
            if not ok:  # fast but wrong must never rank
                print(f"  {direction} H={N} {name}: WRONG outputs (vs the default's)")
                csv.add(**row, variant=name + "+WRONG", ms=round(ms, 4), config=str(cfg), **cost)
                return
            res[name] = (ms, cfg)
            frac = cost["bytes"] / (ms / 1e3) / copy_bw
            csv.add(**row, variant=name, ms=round(ms, 4), fraction_of_copy=round(frac, 3),
                    config=str(cfg), **cost)  # fmt: skip

        time_one("DEFAULT", default)
        for name, cfg in candidates(N).items():
            if cfg != default and (not only or name.startswith(only)):
                time_one(name, cfg)
        if not res:
            print(f"{direction} H={N}: no variant ran")
            continue
        ranked = sorted(res.items(), key=lambda kv: kv[1][0])
        for name, (_, cfg) in ranked[:3]:
            if not cfg.chunked and cfg.programs_per_sm > 0:
                time_one(name + "+pf", replace(cfg, prefetch=True))
        best = min(res.items(), key=lambda kv: kv[1][0])
        time_one(best[0] + "+nodrop", best[1][1], 0.0)
        time_one("DEFAULT+nodrop", default, 0.0)
        ranked = sorted(res.items(), key=lambda kv: kv[1][0])
        dflt = res.get("DEFAULT", (float("nan"),))[0]
        print(f"{direction} H={N}: default {dflt:.4f} ms {nbytes / dflt / 1e-3 / copy_bw:.3f}"
              f"  ({len(res)} variants, {time.time() - t_start:.0f}s); best:")  # fmt: skip
        for name, (ms, _) in ranked[:6]:
            print(f"    {name:<24}{ms:8.4f} ms {nbytes / ms / 1e-3 / copy_bw:6.3f}")


def _widths(text: str) -> set[int]:
    return {int(v) for v in text.split(",") if v and int(v) > 0}


def main(argv=None) -> int:
    ap = parser(__doc__, "sweep")
    ap.add_argument("--fwd-widths", default="1024,2048,4096,8192,16384")
    ap.add_argument("--bwd-widths", default="1024,4096,16384")
    ap.add_argument("--ln-widths", default="", help="LayerNorm-alone forward widths")
    ap.add_argument("--rms-widths", default="", help="RMSNorm-alone forward widths")
    ap.add_argument("--only", default="", help="comma-separated variant name prefixes")
    args = ap.parse_args(argv)
    began = start(args)
    if began is None:
        return 0
    csv, copy_bw = began
    only = tuple(v for v in args.only.split(",") if v)
    widths = {d: _widths(getattr(args, f"{d}_widths")) for d in ("fwd", "bwd", "ln", "rms")}
    names = {"fwd": "fwd", "bwd": "bwd", "ln": "ln-fwd", "rms": "rms-fwd"}
    for N in sorted(set().union(*widths.values())):
        directions = [names[d] for d, ws in widths.items() if N in ws]
        sweep_width(csv, copy_bw, N, directions, only)
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
