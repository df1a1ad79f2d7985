"""How fast the host ran in each recorded real-script trace, beside the profiler's overhead
that membound's step timer measured in the same process (issue 15: "profiler overhead
<= 10%").

    PYTHONPATH=src python benchmarks/host_pace.py [--fixtures DIR] [--only SUBSTRING]

Per fixture (`h200_real_*` with a capture meta): the unprofiled and profiled step medians and
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
import gzip
import json
import statistics
from collections import defaultdict
from pathlib import Path

from membound.analysis import intervals
from membound.analysis.step_timing import StepTiming

ROOT = Path(__file__).resolve().parents[1]
API = ("cuda_runtime", "cuda_driver")
GPU = ("kernel", "gpu_memcpy", "gpu_memset")


def pace(trace: Path, meta: dict) -> dict | None:
    """The row of one fixture, None where its trace has no API call or no step times."""
    timing = StepTiming.from_meta(meta)  # the steps membound's report refers to
    if timing is None or timing.profiled_median_ms is None:
        return None
    events = json.load(gzip.open(trace))["traceEvents"]
    api = sorted((e for e in events if e.get("cat") in API), key=lambda e: e["ts"])
    if not api:
        return None
    by_thread: dict = defaultdict(list)
    for e in api:
        if "Launch" in e["name"]:
            by_thread[e.get("tid")].append(e)
    launches = [e for calls in by_thread.values() for e in calls]
    gaps = [
        b["ts"] - (a["ts"] + a.get("dur", 0))
        for calls in by_thread.values()
        for a, b in zip(calls, calls[1:], strict=False)
    ]
    launch = [e.get("dur", 0) for e in launches]
    gpu = [(e["ts"], e["ts"] + e.get("dur", 0)) for e in events if e.get("cat") in GPU]
    steps = max(1, int(meta.get("steps_captured") or len(timing.profiled_ms)))
    busy_us = intervals.total(intervals.union(*zip(*gpu, strict=True))) if gpu else 0.0
    return {
        "unprofiled_ms": timing.unprofiled_median_ms,
        "profiled_ms": timing.profiled_median_ms,
        "overhead": timing.overhead_fraction,
        "busy_ms": busy_us / 1e3 / steps,
        "launch_us": statistics.median(launch) if launch else None,
        "gap_us": statistics.median([g for g in gaps if g >= 0]) if gaps else None,
        "launches_per_step": len(launches) / steps,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--fixtures", default=str(ROOT / "tests/fixtures"))
    p.add_argument("--only", default="", help="only fixtures whose name holds this")
    a = p.parse_args()
    print(f"{'fixture':34s} {'unprof':>7s} {'prof':>7s} {'ovh':>6s} {'busy':>7s} "
          f"{'launch':>7s} {'gap':>6s} {'launch/step':>11s}")  # fmt: skip
    for d in sorted(Path(a.fixtures).glob("h200_real_*")):
        meta_path, trace = d / "capture.json", d / "trace.json.gz"
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
