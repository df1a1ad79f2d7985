"""Does the timeline pass's profiler cost the host more while the GPU is busy?

A GPU-paced loop's trace replays to far more host work than the loop has as run: the H100
BERT fine-tune in fp32 (2026-12-07, `tests/analysis/test_host_work_2026_12_07_h100.py`) had
32.27 ms/step of host work as run (its syncs made to sleep) and its trace 62.60 recorded,
where the TF32 variant's trace (host-paced, same host) recorded 55.29 and calibrated. The
extra sat in the training thread's gaps, the work the host does while the GPU still runs the
previous step. `trace.profiler_cost` measures the profiler's cost per launch with the GPU
idle (each launch's kernel done before the next). This probe measures it both ways, in one
process, interleaved: rounds of host work with the GPU idle, and the same rounds queued
behind a `torch.cuda._sleep` that keeps the GPU busy until they are all launched, each
without and with a CUDA-only profiler recording the API calls the timeline pass records
(`trace.cupti_api.keep_launches`). Two kinds of host work: `CALLS` one-element in-place adds
(launches alone), and `STEPS` forward-backward steps of a small MLP (Python, autograd,
backward on the autograd thread). Prints one JSON line: per kind and state, the median
host µs per launch plain and profiled, and their difference.

    python benchmarks/probe_busy_profiler.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

#: launches a round of the add kind; MLP steps a round (each ~20 launches); both stay below
#: the ~1,000 launches the GPU's queue holds before a launch blocks
CALLS, STEPS = 600, 15
#: how long the busy state's sleep kernel keeps the GPU busy (cycles; ~2 GHz: ~60 ms)
SLEEP_CYCLES = 120_000_000


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args(argv)
    import torch
    from torch.profiler import ProfilerActivity, profile

    from membound.trace.cupti_api import keep_launches

    if not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device"}))
        return 2
    x = torch.zeros(1, device="cuda")
    mlp = torch.nn.Sequential(
        torch.nn.Linear(64, 64),
        torch.nn.GELU(),
        torch.nn.Linear(64, 64),
        torch.nn.GELU(),
        torch.nn.Linear(64, 1),
    ).cuda()
    data = torch.randn(32, 64, device="cuda")

    def adds() -> int:
        for _ in range(CALLS):
            x.add_(1.0)
        return CALLS

    def steps() -> int:
        for _ in range(STEPS):
            mlp(data).sum().backward()
        return -1  # counted from a profiled round's kernels

    def timed(work, busy: bool) -> float:
        torch.cuda.synchronize()
        if busy:
            torch.cuda._sleep(SLEEP_CYCLES)
        t0 = time.perf_counter()
        work()
        t = time.perf_counter() - t0
        torch.cuda.synchronize()
        return t * 1e6

    launches = {"adds": CALLS}
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        steps()
        torch.cuda.synchronize()
    launches["mlp"] = sum(1 for e in prof.events() if e.device_type.name == "CUDA") or 1
    for work in (adds, steps):  # warm-up
        timed(work, False)
    out: dict[str, dict] = {}
    for name, work in (("adds", adds), ("mlp", steps)):
        for busy in (False, True):
            plain, prof_ = [], []
            for _ in range(args.rounds):
                plain.append(timed(work, busy))
                with profile(activities=[ProfilerActivity.CUDA]):
                    keep_launches()
                    prof_.append(timed(work, busy))
            a, b = statistics.median(plain), statistics.median(prof_)
            n = launches[name]
            out[f"{name}_{'busy' if busy else 'idle'}"] = {
                "plain_us_per_launch": round(a / n, 3),
                "profiled_us_per_launch": round(b / n, 3),
                "cost_us_per_launch": round((b - a) / n, 3),
                "launches": n,
            }
    out["gpu"] = torch.cuda.get_device_name()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
