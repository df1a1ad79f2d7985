"""How fast the host ran in each recorded real-script trace, beside the profiler's overhead
that membound's step timer measured in the same process (issue 15: "profiler overhead
<= 10%").

    PYTHONPATH=src python benchmarks/host_pace.py [--fixtures DIR] [--only SUBSTRING]

Per fixture (`h200_real_*` with a capture meta): the unprofiled and profiled step medians and
the overhead between them; the GPU's busy time per recorded step (kernels, copies, memsets,
overlaps merged); and the host's pace inside the recorded steps, read from the CUDA API calls
of the training thread: the median time a launch call took, and the median gap between one
API call's end and the next call's start (the Python and dispatch work between launches).

Why: on a loop whose host needs nearly as long as its GPU, the profiler's per-launch cost
decides whether the host or the GPU paces the profiled steps, so one script's overhead moves
with the host's speed on the day. Eight eager GPT-2 runs on the H200 kept the GPU's 130.5 ms
of work a step and measured 0.8% to 38% of overhead.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
API = ("cuda_runtime", "cuda_driver")
GPU = ("kernel", "gpu_memcpy", "gpu_memset")


def _merged_us(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def pace(trace: Path, meta: dict) -> dict | None:
    """The row of one fixture, None where its trace has no API call or no step times."""
    times = meta.get("step_times_ms") or {}
    before = [t for t in times.get("unprofiled") or [] if t > 0][1:]  # the first: warm-up
    unprof = before or [t for t in times.get("after") or [] if t > 0]
    prof = [t for t in times.get("profiled") or [] if t > 0]
    if not unprof or not prof:
        return None
    events = json.load(gzip.open(trace))["traceEvents"]
    api = sorted((e for e in events if e.get("cat") in API), key=lambda e: e["ts"])
    if not api:
        return None
    main = Counter(e.get("tid") for e in api).most_common(1)[0][0]  # the training thread
    calls = [e for e in api if e.get("tid") == main]
    gaps = [b["ts"] - (a["ts"] + a.get("dur", 0)) for a, b in zip(calls, calls[1:], strict=False)]
    launch = [e.get("dur", 0) for e in calls if "Launch" in e["name"]]
    gpu = [(e["ts"], e["ts"] + e.get("dur", 0)) for e in events if e.get("cat") in GPU]
    steps = max(1, int(meta.get("steps_captured") or len(prof)))
    u, p = statistics.median(unprof), statistics.median(prof)
    return {
        "unprofiled_ms": u,
        "profiled_ms": p,
        "overhead": p / u - 1,
        "busy_ms": _merged_us(gpu) / 1e3 / steps,
        "launch_us": statistics.median(launch) if launch else None,
        "gap_us": statistics.median([g for g in gaps if g >= 0]) if gaps else None,
        "calls_per_step": len(calls) / steps,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--fixtures", default=str(ROOT / "tests/fixtures"))
    p.add_argument("--only", default="", help="only fixtures whose name holds this")
    a = p.parse_args()
    print(f"{'fixture':34s} {'unprof':>7s} {'prof':>7s} {'ovh':>6s} {'busy':>7s} "
          f"{'launch':>7s} {'gap':>6s} {'calls':>6s}")  # fmt: skip
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
            f"{row['gap_us'] or 0:6.2f} {row['calls_per_step']:6.0f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
