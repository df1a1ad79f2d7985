"""How fast the host ran in each recorded real-script trace, beside the profiler's overhead
that membound's step timer measured in the same process (issue 15: "profiler overhead
<= 10%").

    PYTHONPATH=src python benchmarks/host_pace.py [--fixtures DIR] [--only SUBSTRING]

Per fixture (`h200_real_*`, `h100_real_*` with a capture meta; `--by-thread`: a line per
launching thread too): the unprofiled and profiled step medians and
the overhead between them, as membound's report gives them (`StepTiming.from_meta`); the GPU's busy time per recorded step (kernels, copies, memsets,
overlaps merged); and the host's pace inside the recorded steps, read from the launch calls
(runtime and driver) of each host thread: the median time a launch call took, and the median
gap between one launch's end and the same thread's next launch (the Python and dispatch work
between launches, with any smaller API calls in between).

Why: one script's overhead moves from run to run with the host's pace. On the 47 recorded
H200 runs of 12 scripts (2026-12-05, `benchmarks/results/host_pace_2026-12-05.txt`):
- eight eager GPT-2 runs kept the GPU's ~131 ms of work a step and measured +1% to +38%;
- within a script, the overhead ranks with the median gap between launches: Spearman +0.81
  (GPT-2, 8 runs), +0.90 (compiled GPT-2, 5), +0.90 (ResNet-50 fp32, 5), +0.77 (Lightning, 6);
- over all runs, 2 of the 14 with a gap under 20 us were over 10%, 8 of 17 at 20-25 us, and
  11 of 16 at 25 us or more.
A trace holds only the profiled steps, so it cannot tell whether the host was slow that day or
slowed by the profiler; the capture's per-phase CPU time of the training thread
(`thread_per_step`, with `profiled` since 2026-12-05) can.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

from membound.analysis import intervals
from membound.analysis.step_timing import StepTiming
from membound.trace.capture_meta import timeline_in
from membound.trace.files import open_trace

ROOT = Path(__file__).resolve().parents[1]
API = ("cuda_runtime", "cuda_driver")
GPU = ("kernel", "gpu_memcpy", "gpu_memset")


def pace(trace: Path, meta: dict) -> dict | None:
    """The row of one fixture, None where its trace has no API call or no step times."""
    timing = StepTiming.from_meta(meta)  # the steps membound's report refers to
    if timing is None or timing.profiled_median_ms is None:
        return None
    with open_trace(trace) as f:
        events = json.load(f)["traceEvents"]
    api = sorted((e for e in events if e.get("cat") in API), key=lambda e: e["ts"])
    if not api:
        return None
    by_thread: dict = defaultdict(list)
    for e in api:
        if "Launch" in e["name"]:
            by_thread[e.get("tid")].append(e)
    launches = [e for calls in by_thread.values() for e in calls]
    per_thread_gaps = {tid: _gaps(calls) for tid, calls in by_thread.items()}
    gaps = [g for thread_gaps in per_thread_gaps.values() for g in thread_gaps]
    launch = [e.get("dur", 0) for e in launches]
    steps = max(1, int(meta.get("steps_captured") or len(timing.profiled_ms)))
    threads = {
        tid: _thread_pace(calls, per_thread_gaps[tid], steps) for tid, calls in by_thread.items()
    }
    gpu = [(e["ts"], e["ts"] + e.get("dur", 0)) for e in events if e.get("cat") in GPU]
    busy_us = intervals.total(intervals.union(*zip(*gpu, strict=True))) if gpu else 0.0
    return {
        "unprofiled_ms": timing.unprofiled_median_ms,
        "profiled_ms": timing.profiled_median_ms,
        "overhead": timing.overhead_fraction,
        "busy_ms": busy_us / 1e3 / steps,
        "launch_us": statistics.median(launch) if launch else None,
        "gap_us": statistics.median(gaps) if gaps else None,
        "launches_per_step": len(launches) / steps,
        # per launching thread, busiest first (on CUDA, backward launches from PyTorch's
        # autograd thread, the forward and the syncs from the training thread)
        "threads": dict(sorted(threads.items(), key=lambda kv: -kv[1]["launches_per_step"])),
    }


#: a gap between two launches of one thread up to this long is host work between them (µs);
#: a longer one is the thread waiting (the autograd thread between two backwards)
WORK_GAP_US = 200.0


def _gaps(calls: list[dict]) -> list[float]:
    """The gaps (µs) from each of one thread's launch calls' end to its next call's start,
    overlaps left out."""
    gaps = (b["ts"] - (a["ts"] + a.get("dur", 0)) for a, b in zip(calls, calls[1:], strict=False))
    return [g for g in gaps if g >= 0]


def _thread_pace(calls: list[dict], gaps: list[float], steps: int) -> dict:
    """One thread's launches per step, median launch call and median gap to its next launch
    (µs; `gaps`: `_gaps(calls)`), and per step the time inside its launch calls and in the
    gaps between them up to `WORK_GAP_US` (ms): where its host work went while it launched."""
    return {
        "launches_per_step": len(calls) / steps,
        "launch_us": statistics.median(e.get("dur", 0) for e in calls),
        "gap_us": statistics.median(gaps) if gaps else None,
        "in_launches_ms_per_step": sum(e.get("dur", 0) for e in calls) / steps / 1e3,
        "work_gaps_ms_per_step": sum(g for g in gaps if g <= WORK_GAP_US) / steps / 1e3,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--fixtures", default=str(ROOT / "tests/fixtures"))
    p.add_argument("--only", default="", help="only fixtures whose name holds this")
    p.add_argument("--by-thread", action="store_true", help="a line per launching thread too")
    a = p.parse_args()
    print(f"{'fixture':34s} {'unprof':>7s} {'prof':>7s} {'ovh':>6s} {'busy':>7s} "
          f"{'launch':>7s} {'gap':>6s} {'launch/step':>11s}")  # fmt: skip
    for d in sorted(Path(a.fixtures).glob("h*_real_*")):
        meta_path, trace = d / "capture.json", timeline_in(d)
        if a.only not in d.name or not meta_path.exists() or not trace.exists():
            continue
        row = pace(trace, json.loads(meta_path.read_text()))
        if row is None:
            continue
        print(
            f"{d.name:34s} {row['unprofiled_ms']:7.1f} {row['profiled_ms']:7.1f} "
            f"{row['overhead']:+6.0%} {row['busy_ms']:7.1f} {row['launch_us'] or 0:7.2f} "
            f"{row['gap_us'] or 0:6.2f} {row['launches_per_step']:11.0f}"
        )
        for tid, t in row["threads"].items() if a.by_thread else ():
            print(
                f"  thread {tid!s:<25s} {'':30s} {t['launch_us']:7.2f} "
                f"{t['gap_us'] or 0:6.2f} {t['launches_per_step']:11.0f}   ms/step in launches "
                f"{t['in_launches_ms_per_step']:.2f}, between them "
                f"{t['work_gaps_ms_per_step']:.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
