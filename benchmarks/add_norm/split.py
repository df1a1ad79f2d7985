"""The split backward's two kernels apart at 32768 x N (bf16, GPU time).

The split backward (rows wider than the pair kernel takes, or knob `bwd_pair=None`) writes dx
and dresidual in a row kernel without parameter accumulators, then a column-parallel pass
(`_param_partials_kernel`) re-reads dy and s for dweight and dbias. Printed: the row kernel
alone (no parameter gradients wanted) and the whole backward; recorded: the parameter pass's
tiling variants (2 tensors read), then the whole backward with the best one (knob
`split_pass`). Rows: variant (bm, bn, warps, row programs), ms, fraction_of_copy.

    PYTHONPATH=src python benchmarks/add_norm/split.py --hidden 16384 --run 56
"""

from __future__ import annotations

import torch
from _common import M, P, backward, fused_problem, gpu_ms, parser, saved_forward, start, work


def split_pass(csv, copy_bw, N=16384):
    from membound.kernels._launch import launch
    from membound.kernels.add_norm import Knobs, bwd_config, configured
    from membound.kernels.add_norm.partials import _param_partials_kernel

    x, r, dy, w, b = fused_problem(N)
    s, mean, rstd = saved_forward(x, r, w, b)
    cfg = bwd_config(M, N, None)  # the split backward whatever the width
    whole = work(M, N, 2, 4, "bwd")

    def bwd(want):
        return backward(dy, s, mean, rstd, w, P, cfg, (w.dtype, b.dtype, w.dtype), want)

    for label, want in (("row kernel alone", False), ("whole backward", True)):
        ms = gpu_ms(bwd(want))
        frac = whole["bytes"] / ms / 1e-3 / copy_bw
        print(f"split H={N} {label:<18}{ms:8.4f} ms {frac:6.3f} (4 tensors)")
    buf = torch.empty((2, 64, N), device="cuda", dtype=torch.float32)
    # the pass reads dy and s (2 tensors): dweight += dy * (s - mean) * rstd, dbias += dy
    cost = {"bytes": 2 * M * N * 2, "flops": 5 * M * N}
    res = {}
    for bm, bn, warps in ((16, 128, 4), (32, 128, 4), (16, 256, 4), (32, 256, 8), (8, 512, 4),
                          (16, 512, 8), (64, 64, 4), (32, 64, 4), (8, 256, 4), (64, 128, 8)):  # fmt: skip
        for rp in (8, 16, 32, 64):

            def one(bm=bm, bn=bn, warps=warps, rp=rp):
                launch(
                    _param_partials_kernel, (-(-N // bn), rp),
                    (dy, s, dy, mean, rstd, buf, M, N, -(-M // rp), dy.stride(0), s.stride(0),
                     dy.stride(0)),
                    dict(HAS_DW=True, HAS_DB=True, HAS_DPB=False, IS_RMS=False, BLOCK_M=bm,
                         BLOCK_N=bn), warps, 1,
                )  # fmt: skip

            try:
                ms = gpu_ms(one)
            except Exception as e:  # noqa: BLE001
                print(f"  split pass bm{bm} bn{bn} w{warps} rp{rp}: {type(e).__name__}")
                continue
            res[(rp, bm, bn, warps)] = ms
            csv.add(part="split_pass", rows=M, hidden=N, dtype="bfloat16",
                    variant=f"bm{bm}_bn{bn}_w{warps}_rp{rp}", ms=round(ms, 4),
                    fraction_of_copy=round(cost["bytes"] / ms / 1e-3 / copy_bw, 3), **cost)  # fmt: skip
    ranked = sorted(res.items(), key=lambda kv: kv[1])
    dflt = Knobs().split_pass
    print(f"split parameter pass (reads dy, s; GPU time), default {dflt}:")
    for key, ms in ranked[:5] + ([(dflt, res[dflt])] if dflt in res else []):
        print(f"    rp{key[0]} bm{key[1]} bn{key[2]} w{key[3]}  {ms:8.4f} ms "
              f"{cost['bytes'] / ms / 1e-3 / copy_bw:6.3f} (2 tensors)")  # fmt: skip
    if ranked:
        with configured(split_pass=ranked[0][0]):
            ms = gpu_ms(bwd(True))
        frac = whole["bytes"] / ms / 1e-3 / copy_bw
        print(f"split H={N} whole backward, best pass {ms:8.4f} ms {frac:6.3f}")


def main(argv=None) -> int:
    ap = parser(__doc__, "split")
    ap.add_argument("--hidden", type=int, default=16384)
    args = ap.parse_args(argv)
    began = start(args)
    if began is not None:
        split_pass(*began, args.hidden)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
