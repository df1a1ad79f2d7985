"""Do t5-small's matmuls reach the sweep's TF32/bf16 roofs? (issue 15: T5's fp32-matmul)

On the H200 (2026-12-05) the T5 loop of `examples/real/` saved 4.55 ms/step with TF32 where
membound's fp32-matmul finding predicted 15.88, from its matmuls placed at the TF32 roof of
`membound roofline`'s sweep (4096^3 and larger). This times the shapes a t5-small step runs
(batch 16, source 512, target 128, d_model 512, d_ff 2048, 8 heads of 64; forward and the
two backward products of each linear) in fp32 with TF32 off, with TF32 on and in bf16, with
CUDA events over many repeats, and prints one JSON line per shape and dtype:
the rate and its fraction of the ceilings file given.

    PYTHONPATH=src python benchmarks/probe_small_gemm.py ceilings.json > small_gemm.jsonl
"""

from __future__ import annotations

import json
import sys

import torch

# (name, m, n, k, batch): linear layers as (tokens x out x in) and their two backward
# products; attention's batched products as (batch*heads).
B, S, T, D, F, H = 16, 512, 128, 512, 2048, 8
SHAPES = [
    ("enc qkvo fwd", B * S, D, D, 1),
    ("enc ff-in fwd", B * S, F, D, 1),
    ("enc ff-out fwd", B * S, D, F, 1),
    ("enc ff-in dgrad", B * S, D, F, 1),
    ("enc ff-in wgrad", F, D, B * S, 1),
    ("dec qkvo fwd", B * T, D, D, 1),
    ("dec ff-in fwd", B * T, F, D, 1),
    ("lm head fwd", B * T, 32128, D, 1),
    ("lm head wgrad", 32128, D, B * T, 1),
    ("enc attn scores", S, S, 64, B * H),
    ("enc attn values", S, 64, S, B * H),
    ("cross attn scores", T, S, 64, B * H),
    ("big 4096^3", 4096, 4096, 4096, 1),
]


def time_mm(a: torch.Tensor, b: torch.Tensor, reps: int) -> float:
    mm = torch.bmm if a.dim() == 3 else torch.mm
    for _ in range(5):
        mm(a, b)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        mm(a, b)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / reps


def main() -> None:
    ceil = json.load(open(sys.argv[1])) if len(sys.argv) > 1 else {}
    flops = ((ceil.get("device") or {}).get("ceilings") or {}).get("flops") or {}
    roofs = {k: v / 1e12 for k, v in flops.items()}
    for name, m, n, k, batch in SHAPES:
        for mode in ("fp32", "tf32", "bf16"):
            torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
            dt = torch.bfloat16 if mode == "bf16" else torch.float32
            shape_a, shape_b = ((batch, m, k), (batch, k, n)) if batch > 1 else ((m, k), (k, n))
            a = torch.randn(shape_a, device="cuda", dtype=dt)
            b = torch.randn(shape_b, device="cuda", dtype=dt)
            flop = 2.0 * m * n * k * batch
            ms = time_mm(a, b, reps=max(10, min(2000, int(2e11 / flop))))
            tflops = flop / ms / 1e9
            roof = roofs.get(mode)
            print(json.dumps({
                "shape": name, "m": m, "n": n, "k": k, "batch": batch, "mode": mode,
                "ms": round(ms, 5), "tflops": round(tflops, 1),
                "roof_tflops": round(roof, 1) if roof else None, "of_roof": round(tflops / roof, 3) if roof else None,
            }), flush=True)  # fmt: skip
    torch.backends.cuda.matmul.allow_tf32 = False


if __name__ == "__main__":
    main()
