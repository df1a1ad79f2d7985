"""Does a bf16 matmul's rate depend on its operands' values? (issue 16: the one matmul above
its roof)

`h200_healthy`'s weight gradient (A.T@B, 4096 x 4096 x 16384, bf16) ran at 861 TFLOP/s in
the same call whose sweep measured 815-818 on random normal operands. Its operands are a
ReLU'd activation and a gradient masked by ReLU's backward: half of each is zeros. A GPU
capped by power runs faster on operands that toggle fewer bits. This probe times the same
shapes and layouts on four kinds of operands, in one process, by the kernel clock (CUPTI
durations under a GPU-only profiler: the clock a trace's ops are timed by), in bursts after
an idle GPU and back to back:

- `randn`: both operands normal (the sweep's);
- `relu`: both operands normal with their negative half set to zero (a ReLU network's);
- `relu_mask`: A normal with a random half set to zero (a gradient masked by ReLU's
  backward), B = relu(normal);
- `zeros`: both all zeros (the lowest power there is).

One JSON line per (shape, layout, data, way): median and best TFLOP/s.

    PYTHONPATH=src python benchmarks/probe_matmul_data.py [--out FILE.jsonl]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

SHAPES = ((4096, 4096, 16384, "A.T@B"), (8192, 8192, 8192, "A@B"), (16384, 4096, 4096, "A@B.T"))
DATA = ("randn", "relu", "relu_mask", "zeros")


def operands(m: int, n: int, k: int, layout: str, data: str):
    """A callable computing the (m, n, k) product in `layout` on operands of kind `data`."""
    g = torch.Generator(device="cuda").manual_seed(0)
    shape_a = (k, m) if layout == "A.T@B" else (m, k)
    shape_b = (n, k) if layout == "A@B.T" else (k, n)

    def make(shape, how):
        if data == "zeros":
            return torch.zeros(shape, device="cuda", dtype=torch.bfloat16)
        t = torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=g)
        if how == "relu":
            return t.clamp_min_(0)
        if how == "mask":
            keep = torch.rand(shape, device="cuda", generator=g) < 0.5
            return t * keep
        return t

    a = make(shape_a, {"randn": "", "relu": "relu", "relu_mask": "mask"}.get(data, ""))
    b = make(shape_b, {"randn": "", "relu": "relu", "relu_mask": "relu"}.get(data, ""))
    if layout == "A.T@B":
        return lambda: a.t() @ b
    if layout == "A@B.T":
        return lambda: torch.nn.functional.linear(a, b)
    return lambda: a @ b


def kernel_us(fn, calls: int, idle_ms: float, bursts: int) -> list[float]:
    """Durations (µs) of the GEMM kernels of `bursts` bursts of `calls` calls, each burst
    after `idle_ms` of idle GPU, by CUPTI."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(bursts):
            torch.cuda.synchronize()
            time.sleep(idle_ms / 1e3)
            for _ in range(calls):
                fn()
        torch.cuda.synchronize()
    out = []
    for e in prof.events():
        if e.device_type.name == "CUDA" and ("gemm" in e.name.lower() or "sm90" in e.name):
            out.append(e.device_time)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="JSON lines file (default: stdout only)")
    p.add_argument("--bursts", type=int, default=8)
    args = p.parse_args(argv)
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    for m, n, k, layout in SHAPES:
        flop = 2.0 * m * n * k
        for data in DATA:
            fn = operands(m, n, k, layout, data)
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            for way, calls, idle in (("burst", 3, 50.0), ("sustained", 40, 0.0)):
                us = kernel_us(fn, calls, idle, args.bursts if way == "burst" else 2)
                if not us:
                    continue
                rates = [flop / (u * 1e-6) / 1e12 for u in us]
                row = {
                    "shape": [m, n, k], "layout": layout, "data": data, "way": way,
                    "calls": len(us), "median_tflops": round(statistics.median(rates), 1),
                    "best_tflops": round(max(rates), 1),
                }  # fmt: skip
                rows.append(row)
                print(json.dumps(row), flush=True)
            del fn
            torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
