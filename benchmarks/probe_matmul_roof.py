"""Why do recorded bf16 matmuls run above the measured matmul ceiling? (issue 16)

The sweep of `membound roofline` times each shape back to back for ~200 ms and keeps the best
median: 710-721 TFLOP/s on the H200. The recorded model traces run their matmuls at 800-887
(GPT-2's LM head 12288x768x50304 at 838, `h200_healthy`'s 16384x4096x4096 at 887). This probe
times the same shapes four ways, in one process:

- `sustained`: back to back for `--window-ms` after a warm-up (the sweep's way), CUDA events;
- `burst`: after `--idle-ms` of an idle GPU, three calls, each between its own events;
- `interleaved`: each call after a 1 GiB copy (as in a model, where memory-bound ops sit
  between the matmuls), events around the matmul only, for `--window-ms`;
- `kernel`: CUPTI's kernel durations (torch.profiler, GPU activity only) of sustained calls,
  the figure a trace holds.

and prints one JSON line per (shape, layout, way) with the median and best rate and the SM
clock (NVML) seen around it.

    PYTHONPATH=src python benchmarks/probe_matmul_roof.py [--out FILE.jsonl]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

SHAPES = (  # (m, n, k): the sweep's four, then shapes the recorded models run
    (4096, 4096, 4096), (8192, 8192, 8192), (16384, 16384, 4096), (65536, 1024, 4096),
    (12288, 3072, 768), (12288, 768, 3072), (12288, 2304, 768), (12288, 50304, 768),
    (16384, 4096, 4096), (8192, 2816, 1024), (8192, 1024, 2816),
)  # fmt: skip


def sm_clock() -> float | None:
    try:
        return float(torch.cuda.clock_rate())
    except Exception:  # noqa: BLE001 - no NVML
        return None


def operands(m, n, k, layout):
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    if layout == "A@B.T":
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        return lambda: torch.nn.functional.linear(a, w)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    return lambda: a @ b


def spin(fn, ms: float) -> None:
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        fn()
    torch.cuda.synchronize()


def sustained(fn, window_ms: float) -> list[float]:
    """ms per call, per window of calls timed by two events."""
    t = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    one = max(time.perf_counter() - t, 1e-5) * 1e3
    n = max(4, int(window_ms / 5 / one))
    out = []
    for _ in range(5):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(n):
            fn()
        e1.record()
        e1.synchronize()
        out.append(e0.elapsed_time(e1) / n)
    return out


def burst(fn, idle_ms: float, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        torch.cuda.synchronize()
        time.sleep(idle_ms / 1e3)
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        ev[0].record()
        for e in ev[1:]:
            fn()
            e.record()
        ev[-1].synchronize()
        out += [ev[i].elapsed_time(ev[i + 1]) for i in range(3)]
    return out


def interleaved(fn, window_ms: float) -> list[float]:
    src = torch.empty(1 << 28, device="cuda")  # 1 GiB
    dst = torch.empty_like(src)
    out = []
    end = time.perf_counter() + window_ms / 1e3
    while time.perf_counter() < end:
        pairs = []
        for _ in range(8):
            dst.copy_(src)
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            fn()
            e1.record()
            pairs.append((e0, e1))
        pairs[-1][1].synchronize()
        out += [a.elapsed_time(b) for a, b in pairs]
    del src, dst
    return out


def kernel(fn, calls: int) -> list[float]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return [
        e.device_time / 1e3
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA and e.device_time > 0
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--window-ms", type=float, default=200.0)
    p.add_argument("--idle-ms", type=float, default=20.0)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    sink = open(a.out, "a") if a.out else None  # noqa: SIM115 - closed at the end
    print(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}))
    for m, n, k in SHAPES:
        for layout in ("A@B.T", "A@B"):
            fn = operands(m, n, k, layout)
            spin(fn, 300)
            flop = 2 * m * n * k
            for way, run in (
                ("sustained", lambda fn=fn: sustained(fn, a.window_ms)),
                ("kernel", lambda fn=fn: kernel(fn, 20)),
                ("interleaved", lambda fn=fn: interleaved(fn, a.window_ms)),
                ("burst", lambda fn=fn: burst(fn, a.idle_ms, a.reps)),
            ):
                c0 = sm_clock()
                ms = run()
                c1 = sm_clock()
                med = statistics.median(ms)
                row = {
                    "m": m, "n": n, "k": k, "layout": layout, "way": way, "samples": len(ms),
                    "median_tflops": round(flop / med / 1e9, 1),
                    "best_tflops": round(flop / min(ms) / 1e9, 1),
                    "median_us": round(med * 1e3, 2), "sm_mhz": [c0, c1],
                }  # fmt: skip
                line = json.dumps(row)
                print(line, flush=True)
                if sink:
                    sink.write(line + "\n")
            del fn
            torch.cuda.empty_cache()
    if sink:
        sink.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
