"""The classic precision experiment on a memory-bound op (LayerNorm, 32768 x 4096 by default).

1. fp32 storage, fp32 math  vs  fp32 storage, fp16 math: the same bytes move, so the same time
   (a minimal Triton LayerNorm with the math dtype as a switch, plus torch's F.layer_norm and
   F.layer_norm under autocast, which keeps LayerNorm in fp32 anyway).
2. 16-bit storage: half the bytes, about half the time.
3. Residual add + dropout + LayerNorm: three unfused eager kernels (dropout writes its mask
   too) vs membound's fused kernel, which moves 4 tensors instead of 7 (+ the mask).

Every row: bytes the variant moves, median ms, GB/s, fraction of the copy bandwidth measured
in the same run.

    PYTHONPATH=src python benchmarks/bench_precision.py [--rows 32768 --hidden 4096] [--run N]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import RESULTS_DIR, CsvRows, add_output_args, bench_ms, copy_bandwidth  # noqa: E402


def _ln_kernel():
    """A one-row-per-program LayerNorm whose math dtype is a compile-time switch (built lazily:
    importing this file must not need triton)."""
    import triton
    import triton.language as tl

    @triton.jit
    def _layer_norm_kernel(X, Y, W, B, N, eps, MATH: tl.constexpr, BLOCK_N: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK_N)
        ok = cols < N
        x = tl.load(X + row * N + cols, mask=ok, other=0.0).to(MATH)
        mean = tl.sum(x, axis=0) / N
        d = tl.where(ok, x - mean, 0.0)
        var = tl.sum(d * d, axis=0) / N
        rstd = 1.0 / tl.sqrt(var + eps)
        w = tl.load(W + cols, mask=ok, other=0.0).to(MATH)
        b = tl.load(B + cols, mask=ok, other=0.0).to(MATH)
        y = d * rstd * w + b
        tl.store(Y + row * N + cols, y.to(Y.dtype.element_ty), mask=ok)

    def run(x, w, b, math_dtype):
        M, N = x.shape
        y = torch.empty_like(x)
        bn = triton.next_power_of_2(N)
        math = {torch.float32: tl.float32, torch.float16: tl.float16}[math_dtype]
        warps = max(1, min(16, bn // 256))
        _layer_norm_kernel[(M,)](x, y, w, b, N, 1e-5, MATH=math, BLOCK_N=bn, num_warps=warps)
        return y

    return run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=32768)
    ap.add_argument("--hidden", type=int, default=4096)
    add_output_args(ap, RESULTS_DIR / "precision.csv")
    args = ap.parse_args(argv)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    if dev == "cpu" and args.rows * args.hidden > 1 << 16:
        print("bench_precision needs a CUDA device (CPU: only tiny sizes, TRITON_INTERPRET=1).")
        return 0
    from membound.nn.functional import add_norm

    M, N = args.rows, args.hidden
    copy_bw = copy_bandwidth()
    out = CsvRows(args.csv, args.run)
    ln = _ln_kernel()
    x32 = torch.randn(M, N, device=dev)
    r32 = torch.randn(M, N, device=dev)
    w32, b32 = torch.randn(N, device=dev), torch.randn(N, device=dev)
    x16, r16, w16, b16 = (t.bfloat16() for t in (x32, r32, w32, b32))
    xh, wh, bh = x32.half(), w32.half(), b32.half()
    E = M * N

    def eager_unfused(x, r, w, b):
        s = F.dropout(x, 0.1) + r
        return F.layer_norm(s, (N,), w, b, 1e-5), s

    def autocast_ln():
        with torch.autocast(dev, dtype=torch.float16 if dev == "cuda" else torch.bfloat16):
            return F.layer_norm(x32, (N,), w32, b32, 1e-5)

    # name -> (callable, bytes moved, storage, math)
    cases = {
        "triton LN fp32 storage / fp32 math": (lambda: ln(x32, w32, b32, torch.float32), 8 * E),
        "triton LN fp32 storage / fp16 math": (lambda: ln(x32, w32, b32, torch.float16), 8 * E),
        "triton LN fp16 storage / fp32 math": (lambda: ln(xh, wh, bh, torch.float32), 4 * E),
        "triton LN bf16 storage / fp32 math": (lambda: ln(x16, w16, b16, torch.float32), 4 * E),
        "torch LN fp32": (lambda: F.layer_norm(x32, (N,), w32, b32, 1e-5), 8 * E),
        "torch LN fp32 under autocast(fp16)": (autocast_ln, 8 * E),
        "torch LN bf16": (lambda: F.layer_norm(x16, (N,), w16, b16, 1e-5), 4 * E),
        # dropout: read x, write x' and a 1-byte mask; add: read x', r, write s; LN: read s, write y
        "unfused add+dropout+LN bf16 (3 kernels)": (
            lambda: eager_unfused(x16, r16, w16, b16),
            (2 + 3 + 2) * 2 * E + E,
        ),
        "fused add+dropout+LN bf16 (membound)": (
            lambda: add_norm(x16, w16, b16, residual=r16, dropout_p=0.1, prenorm=True),
            4 * 2 * E,
        ),
    }
    print(f"copy bandwidth {copy_bw / 1e12:.2f} TB/s; LayerNorm {M} x {N}")
    print(f"{'variant':<42}{'MB moved':>10}{'ms':>10}{'GB/s':>9}{'copy%':>8}")
    with torch.no_grad():
        for name, (fn, nbytes) in cases.items():
            try:
                ms = bench_ms(fn)
            except Exception as e:  # one failing case must not stop the others
                print(f"{name:<42} FAILED: {type(e).__name__}: {e}")
                continue
            gbs = nbytes / (ms / 1e3) / 1e9
            out.add(
                variant=name, rows=M, hidden=N, bytes=nbytes, flops=8 * E, ms=round(ms, 5),
                **{"GB/s": round(gbs, 1)}, fraction_of_copy=round(gbs * 1e9 / copy_bw, 3),
            )  # fmt: skip
            print(
                f"{name:<42}{nbytes / 1e6:>10.1f}{ms:>10.4f}{gbs:>9.0f}{100 * gbs * 1e9 / copy_bw:>7.1f}%"
            )
    print(f"CSV: {args.csv}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
