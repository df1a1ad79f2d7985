"""The GPU's turnaround between queued kernels, with and without the profiler (issue 15).

`analysis.replay` plays a step again with its syncs dropped or its kernels shortened; it
starts a queued kernel the moment the one before it ends. The timeline pass shows a gap there
(`analysis.timeline`'s `queued` idle: about 1.4 us a kernel on an H100), which no host change
removes: on the DDPM U-Net (H100, 2026-12-06: 2,679 kernels a step) the replay counted its
3.7 ms a step as the sync's saving (5.06 predicted, 1.28 and 1.74 measured). Replaying with
the trace's gap fixed that loop but took the eager GPT-2's measured sync savings to nothing,
so the profiled gap is likely more than the GPU's own. This measures both.

A spin kernel (`torch.cuda._sleep`) holds the stream while the host queues `--kernels`
small in-place adds behind it; CUDA events around the adds give their period (duration plus
turnaround) as the loop runs: no profiler. The same is then run under `torch.profiler` with
CUDA activity only (the timeline pass's kind): the events' period there, and from the trace
each add's duration and the gap before the next. One JSON line per tensor size:

    unprofiled_period_us   the adds' period, events, no profiler
    profiled_period_us     the same under the profiler
    traced_dur_us          median traced duration of an add
    traced_gap_us          median traced gap between two adds (the trace's turnaround)
    implied_turnaround_us  unprofiled period less the traced duration: the GPU's own gap,
                           where the profiler does not change a kernel's duration

    PYTHONPATH=src python benchmarks/probe_turnaround.py > turnaround.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import numpy as np

#: elements of the fp32 tensor each add writes (a few us of kernel each on an H100)
SIZES = (1 << 10, 1 << 14, 1 << 18, 1 << 20)


def traced_stats(ts_us: np.ndarray, dur_us: np.ndarray) -> dict[str, float]:
    """Median duration and median gap (next start less this end, not below 0) of the kernels
    of one stream, given their starts and durations in µs (any order)."""
    order = np.argsort(ts_us)
    ts, dur = np.asarray(ts_us, float)[order], np.asarray(dur_us, float)[order]
    gaps = np.maximum(ts[1:] - (ts[:-1] + dur[:-1]), 0.0) if len(ts) > 1 else np.zeros(0)
    return {
        "traced_dur_us": round(float(np.median(dur)), 4) if len(dur) else float("nan"),
        "traced_gap_us": round(float(np.median(gaps)), 4) if len(gaps) else float("nan"),
    }


def implied_turnaround(period_us: float, traced_dur_us: float) -> float:
    """The unprofiled period less the traced duration (µs): the GPU's own gap between queued
    kernels, where tracing leaves a kernel's duration as it was."""
    return round(period_us - traced_dur_us, 4)


def _period_us(torch, x, kernels: int, spin_cycles: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(spin_cycles)  # the stream is busy while the host queues the adds
    start.record()
    for _ in range(kernels):
        x.add_(1.0)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / kernels


def _traced(torch, x, kernels: int, spin_cycles: int) -> tuple[float, dict[str, float]]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        period = _period_us(torch, x, kernels, spin_cycles)
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    finally:
        os.unlink(path)
    adds = [
        e for e in events if e.get("cat") == "kernel" and "sleep" not in e.get("name", "").lower()
    ]
    ts = np.array([float(e["ts"]) for e in adds])
    dur = np.array([float(e["dur"]) for e in adds])
    return period, traced_stats(ts, dur)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernels", type=int, default=2000, help="adds queued per timing")
    ap.add_argument("--rounds", type=int, default=3, help="timings per size (median kept)")
    ap.add_argument("--spin-cycles", type=int, default=200_000_000, help="the gate's length")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("probe_turnaround: needs a CUDA device", file=sys.stderr)
        return 2
    for n in SIZES:
        x = torch.zeros(n, device="cuda")
        _period_us(torch, x, 50, 1000)  # warm: the add's kernel loaded
        plain = float(np.median([_period_us(torch, x, args.kernels, args.spin_cycles)
                                 for _ in range(args.rounds)]))  # fmt: skip
        runs = [_traced(torch, x, args.kernels, args.spin_cycles) for _ in range(args.rounds)]
        profiled = float(np.median([p for p, _ in runs]))
        dur = float(np.median([s["traced_dur_us"] for _, s in runs]))
        gap = float(np.median([s["traced_gap_us"] for _, s in runs]))
        print(json.dumps({
            "elements": n, "kernels": args.kernels, "gpu": torch.cuda.get_device_name(),
            "unprofiled_period_us": round(plain, 4), "profiled_period_us": round(profiled, 4),
            "traced_dur_us": dur, "traced_gap_us": gap,
            "implied_turnaround_us": implied_turnaround(plain, dur),
        }), flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
