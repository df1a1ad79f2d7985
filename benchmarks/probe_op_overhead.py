"""Does a GPU-only profiler slow the host's CPU-side ATen ops, during and after it (issue 15)?

On the H200 the tabular MLP (`examples/real/tabular_mlp.py`: 2048 `aten::select` a batch in
its default collate, a few dozen kernels a step) ran 12% slower in membound's timeline pass
(GPU activity and runtime calls only) than in the steps before it, and the steps after the
capture were slower still. A runtime-call cost cannot explain it: the step has few CUDA
calls. The hypothesis: the profiler's per-op observers (RecordFunction callbacks) run on
every ATen op even when only GPU activity is asked for, and some of it outlives the profiler.

One process. Each window: `--ops` row selects from a CPU tensor and a torch.stack of them (a
default collate's work), then a few kernels on the GPU. Windows are timed plain, under a
`torch.profiler.profile(activities=[CUDA])`, under one with CPU activity too, and plain again
after each; one JSON line per phase with the median µs per select op.

    PYTHONPATH=src python benchmarks/probe_op_overhead.py [--ops 2048] [--windows 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile


def window(t: torch.Tensor, ops: int, x: torch.Tensor) -> float:
    t0 = time.perf_counter()
    rows = [t[i] for i in range(ops)]
    torch.stack(rows)
    for _ in range(8):
        x.add_(1.0)
    return (time.perf_counter() - t0) / ops * 1e6


def phase(name: str, t, ops: int, windows: int, x, prof=None) -> dict:
    vals = []
    if prof is not None:
        prof.start()
    for _ in range(windows):
        vals.append(window(t, ops, x))
    torch.cuda.synchronize()
    if prof is not None:
        prof.stop()
    return {"phase": name, "us_per_op": round(statistics.median(vals), 3),
            "min": round(min(vals), 3), "max": round(max(vals), 3)}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", type=int, default=2048)
    p.add_argument("--windows", type=int, default=15)
    a = p.parse_args()
    t = torch.randn(a.ops, 64)
    x = torch.zeros(1, device="cuda")
    for _ in range(3):
        window(t, a.ops, x)
    rows = [phase("plain", t, a.ops, a.windows, x)]
    rows.append(phase("gpu-only profiler", t, a.ops, a.windows, x,
                      profile(activities=[ProfilerActivity.CUDA])))  # fmt: skip
    rows.append(phase("plain after gpu-only", t, a.ops, a.windows, x))
    rows.append(phase("cpu+gpu profiler", t, a.ops, a.windows, x,
                      profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])))  # fmt: skip
    rows.append(phase("plain after cpu+gpu", t, a.ops, a.windows, x))
    rows.append(phase("cpu+gpu+shapes profiler", t, a.ops, a.windows, x,
                      profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                              record_shapes=True)))  # fmt: skip
    rows.append(phase("plain after shapes", t, a.ops, a.windows, x))
    for r in rows:
        r.update(torch=torch.__version__)
        print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
