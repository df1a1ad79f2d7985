"""Why do a model's memory-bound ops (and its matmuls) run above the passes of `membound
roofline`, even by the kernel clock? (issue 16)

On the H200, same call, same clock (CUPTI kernel durations): ReLU's forward on 268 MB calls
ran at up to 4.44 TB/s (median 4.35) against 4.32 for the best copy pass at any size, and a
weight gradient's bf16 matmul at 861 TFLOP/s against 821 for the same shape and layout in the
sweep. Two candidates, told apart here by the kernel clock of the consumer kernel alone:

- L2: in a model an op reads what the op before it just wrote, and L2 (60 MiB) may still
  hold some of it; the passes re-read an input nothing wrote since the last call.
- data: the model's tensors are not uniform random numbers (ReLU's output is half zeros),
  and a power-limited GPU runs some data faster.

Cases per op: `alone` (the pass's way), `after-producer` (a copy writes the op's input just
before), `after-producer-flushed` (that copy, then a 256 MiB read so L2 holds none of it, and no dirty lines),
`relu-data` (alone, on an input that is half zeros), and for the matmul `rand` against
`relu-data` operands. One JSON line per (op, case): median and best rate over the calls.

    PYTHONPATH=src python benchmarks/probe_chain_roof.py [--out FILE.jsonl] [--calls 30]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
from torch.profiler import ProfilerActivity, profile


def kernel_spans(run, calls: int) -> list[tuple[str, float]]:
    """(name, µs) of every GPU activity of `calls` runs of `run`, in start order."""
    run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            run()
        torch.cuda.synchronize()
    out = []
    for e in prof.profiler.kineto_results.events():
        if str(e.device_type()).rsplit(".", 1)[-1] == "CUDA":
            out.append((int(e.start_ns()), e.name(), e.duration_ns() / 1e3))
    return [(n, d) for _, n, d in sorted(out)]


def consumer_rates(op, prep, work: float, calls: int) -> list[float]:
    """Rates (work per second) of `op`'s kernels when each call runs after `prep()`."""
    names = {n for n, _ in kernel_spans(op, 2)}

    def run():
        if prep is not None:
            prep()
        op()

    spans = kernel_spans(run, calls)
    prep_names = {n for n, _ in kernel_spans(prep, 2)} if prep is not None else set()
    mine = [d for n, d in spans if n in names and n not in prep_names]
    return [work / (d * 1e-6) for d in mine]


def nothing():
    return None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=None)
    p.add_argument("--calls", type=int, default=30)
    a = p.parse_args()
    rows = []
    dev = "cuda"
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    clean = torch.empty(64 << 20, device=dev)  # 256 MiB read: L2 left holding clean lines
    shape = (8192, 4096)  # h200_healthy's ReLU: 134 MB in, 134 MB out (fp32)
    src = torch.randn(shape, device=dev)
    x = torch.randn(shape, device=dev)
    out = torch.empty_like(x)
    grad = torch.randn(shape, device=dev)
    relu_x = torch.relu(torch.randn(shape, device=dev))  # half zeros
    ops = {
        "clamp_min fp32": (lambda inp: torch.clamp_min(inp, 0.0, out=out), 2 * x.nbytes),
        "threshold_backward fp32": (
            lambda inp: torch.ops.aten.threshold_backward.grad_input(
                grad, inp, 0.0, grad_input=out
            ),
            3 * x.nbytes,
        ),
    }
    for name, (fn, work) in ops.items():
        cases = {
            "alone": (lambda fn=fn: fn(x), nothing),
            "after-producer": (lambda fn=fn: fn(x), lambda: x.copy_(src)),
            "after-producer-flushed": (lambda fn=fn: fn(x), lambda: (x.copy_(src), clean.sum())),
            "relu-data": (lambda fn=fn: fn(relu_x), nothing),
        }
        for case, (op, prep) in cases.items():
            rates = consumer_rates(op, None if prep is nothing else prep, work, a.calls)
            rows.append({"op": name, "case": case, "calls": len(rates),
                         "median_tbs": round(statistics.median(rates) / 1e12, 4),
                         "best_tbs": round(max(rates) / 1e12, 4)})  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
    # the weight gradient's matmul: A.T @ B, 4096 x 16384 x 4096 bf16
    m, n, k = 4096, 4096, 16384
    work = 2 * m * n * k
    for case in ("rand", "relu-data"):
        a_ = torch.randn(k, m, device=dev, dtype=torch.bfloat16)
        b_ = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
        if case == "relu-data":
            a_, b_ = torch.relu(a_), b_
        at = a_.t()
        for sub, prep in (("alone", None), ("after-256MiB-fill", lambda: flush.fill_(2))):
            rates = consumer_rates(lambda at=at, b_=b_: torch.mm(at, b_), prep, work, a.calls)
            rows.append({"op": "mm A.T@B bf16 4096x4096x16384", "case": f"{case} {sub}",
                         "calls": len(rates),
                         "median_tflops": round(statistics.median(rates) / 1e12, 1),
                         "best_tflops": round(max(rates) / 1e12, 1)})  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
    if a.out:
        with open(a.out, "a") as f:
            for r in rows:
                f.write(json.dumps({**r, "torch": torch.__version__,
                                    "gpu": torch.cuda.get_device_name()}) + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
