"""Does the timeline pass slow pageable host-to-device copies (issue 15's overhead)?

On 2026-12-05 the timm ViT's profiled steps ran 34% over its unprofiled ones. Its 38.5 MB
pageable batch copy took 8.8-10.6 ms in that trace (3.6-4.4 GB/s), against 6.6-7.0 GB/s for
the same copy in the planted pageable trace and 8.1 GB/s in the design notes' benchmark. If
CUPTI's tracing slows the driver's staged pageable copy, the profiler's overhead on every
pageable loader is partly this, and the analysis should say so. This times, in one process,
`ROUNDS` rounds of `COPIES` pageable `non_blocking` copies of one batch (host timer, synced
after each copy), interleaved across: no profiler; a CUDA-only profiler (the timeline pass);
the same with only the calls the timeline reads recorded (`trace.cupti_api`); and a pinned
copy as the roof. Prints one JSON line per variant (median ms and GB/s) and a summary.

    PYTHONPATH=src python benchmarks/probe_pageable_cupti.py [--mb 38.5] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=float, default=38.5, help="batch size in MB (default 38.5)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--copies", type=int, default=10, help="copies per round and variant")
    args = p.parse_args(argv)
    import torch
    from torch.profiler import ProfilerActivity, profile

    if not torch.cuda.is_available():
        print("probe_pageable_cupti: needs a CUDA device", file=sys.stderr)
        return 2
    from membound.trace.cupti_api import keep_launches

    n = int(args.mb * 1e6 / 4)
    pageable = torch.randn(n)
    pinned = torch.randn(n).pin_memory()
    dev = torch.empty(n, device="cuda")

    def copies(src) -> list[float]:
        out = []
        for _ in range(args.copies):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            dev.copy_(src, non_blocking=True)
            torch.cuda.synchronize()
            out.append((time.perf_counter() - t0) * 1e3)
        return out

    copies(pageable), copies(pinned)  # warm-up
    times: dict[str, list[float]] = {"plain": [], "cuda": [], "launches": [], "pinned": []}
    for _ in range(args.rounds):
        times["plain"] += copies(pageable)
        with profile(activities=[ProfilerActivity.CUDA]):
            times["cuda"] += copies(pageable)
        with profile(activities=[ProfilerActivity.CUDA]):
            keep_launches()
            times["launches"] += copies(pageable)
        times["pinned"] += copies(pinned)
    nbytes = n * 4
    summary = {}
    for variant, xs in times.items():
        med = statistics.median(xs)
        summary[variant] = {"ms": round(med, 3), "gb_s": round(nbytes / med / 1e6, 2)}
        print(json.dumps({"variant": variant, "mb": args.mb, **summary[variant]}), flush=True)
    base = summary["plain"]["ms"]
    print(
        "PROBE_SUMMARY "
        + json.dumps({v: f"{s['ms'] / base - 1:+.1%}" for v, s in summary.items()}),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
