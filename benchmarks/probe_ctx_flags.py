"""Can a run's CUDA syncs be switched from spinning to sleeping after its context exists?

`membound diagnose --sleeping-syncs` (`trace.sync_mode`) sets the blocking-sync flag on the
primary contexts before the script makes one, so the whole run sleeps in its syncs, the
unprofiled steps the report gives as the loop's step included. Since CUDA 12.1 the driver
has `cuCtxSetFlags`, which sets the current context's flags, the scheduling ones among them.
If it takes effect at once, a capture could time the unprofiled steps as the user runs them
(spinning) and sleep only in the steps that measure host work. This probe measures it, in one
process: a GPU-paced step (a `torch.cuda._sleep` of about `--gpu-ms`, some small launches,
then a `.item()`), timed by wall clock and by the training thread's CPU clock, in phases:

1. `spin`: as the process starts (the context's default scheduling);
2. `sleep`: after `cuCtxSetFlags(flags | CU_CTX_SCHED_BLOCKING_SYNC)` on the current context;
3. `sleep_profiled`: the same under a CUDA-activity-only profiler (the timeline pass's kind);
4. `spin_again`: after `cuCtxSetFlags` back to the flags read at the start.

A phase whose syncs sleep shows a thread CPU far below its wall step. Prints one JSON line:
the driver's return codes, the flags read back after each switch, and each phase's medians.

    python benchmarks/probe_ctx_flags.py [--steps 12] [--gpu-ms 20]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import time

#: CUctx_flags: CU_CTX_SCHED_MASK and CU_CTX_SCHED_BLOCKING_SYNC
SCHED_MASK, SCHED_BLOCKING_SYNC = 0x07, 0x04


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--gpu-ms", type=float, default=20.0)
    args = p.parse_args(argv)
    import torch
    from torch.profiler import ProfilerActivity, profile

    if not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device"}))
        return 2
    x = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    # cycles per ms, from one timed sleep kernel
    t = time.perf_counter()
    torch.cuda._sleep(10_000_000)
    torch.cuda.synchronize()
    cycles = int(10_000_000 * args.gpu_ms / ((time.perf_counter() - t) * 1e3))
    lib = ctypes.CDLL("libcuda.so.1")
    out: dict = {"device": torch.cuda.get_device_name(0), "cycles": cycles}

    def get_flags() -> int:
        f = ctypes.c_uint(0)
        rc = lib.cuCtxGetFlags(ctypes.byref(f))
        return f.value if rc == 0 else -rc

    def set_flags(flags: int) -> int:
        fn = getattr(lib, "cuCtxSetFlags", None)
        return -999 if fn is None else int(fn(ctypes.c_uint(flags)))

    def phase(name: str) -> None:
        walls, cpus = [], []
        for _ in range(args.steps + 1):
            w, c = time.perf_counter(), time.thread_time()
            torch.cuda._sleep(cycles)
            for _ in range(50):
                x.add_(1.0)
            x.item()
            walls.append((time.perf_counter() - w) * 1e3)
            cpus.append((time.thread_time() - c) * 1e3)
        out[name] = {
            "wall_ms": round(statistics.median(walls[1:]), 3),
            "thread_cpu_ms": round(statistics.median(cpus[1:]), 3),
        }

    start = get_flags()
    out["flags_at_start"] = start
    phase("spin")
    out["set_sleep_rc"] = set_flags((max(start, 0) & ~SCHED_MASK) | SCHED_BLOCKING_SYNC)
    out["flags_after_sleep"] = get_flags()
    phase("sleep")
    with profile(activities=[ProfilerActivity.CUDA]):
        phase("sleep_profiled")
    out["flags_after_profiler"] = get_flags()
    out["set_back_rc"] = set_flags(max(start, 0))
    out["flags_after_back"] = get_flags()
    phase("spin_again")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
