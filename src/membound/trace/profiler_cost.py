"""After `membound diagnose`'s script ends: measure what the timeline pass's profiler adds to
the host per CUDA call on this machine, and keep it in the capture meta.

The replays (`analysis.replay`) take the profiler's cost off every recorded call, calibrated
so that the replayed step equals the unprofiled one. Where the GPU sets the pace the step
does not show that cost (it hides behind the GPU), the calibration reads 0, and a replay
with shorter kernels then keeps the profiler's cost in the host's floor. Out of sample on
the H200, BERT-base fp32 (busy 86%): the GPU what-if predicted 9.3 ms/step for bf16 where
it measured 13.5, and 3.5-5 µs per call taken off would have predicted 12.2-13.3. This
measures the cost instead of assuming it (on the H200, 2026-12-04: 0.8-1.1 µs per call, so
that was not the miss's cause): in a process of its own (after the script, so it never
takes time from the steps membound timed), `ROUNDS` rounds of `CALLS` launches of a
one-element in-place add, host-paced, timed with and without a GPU-only profiler (the
timeline pass's activities). A failure is a note in the meta, never a failed diagnose.

    python -m membound.trace.profiler_cost [launches]   # prints one JSON line

(`launches`: as a capture with `--api-records launches` records.)
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from membound.trace import capture_meta, meta_probe

#: the meta key the measurement (or why there is none) is kept under
META_KEY = "profiler_host_cost"
#: how a note on a missing measurement begins
LABEL = "profiler cost not measured"
#: seconds the probe may take (CUDA start-up dominates)
TIMEOUT_S = 60.0
#: launches per timed run, and runs of each kind (interleaved)
CALLS, ROUNDS = 2000, 5


def measure(calls: int = CALLS, rounds: int = ROUNDS, api_records: str = "all") -> dict[str, Any]:
    """{"us_per_call", "plain_us", "profiled_us", "calls", "rounds", "api_records"}: the
    median host time per launch without and with a CUDA-only profiler, and their difference
    (>= 0); with `api_records="launches"` the profiler records the API calls the timeline
    pass records in that mode (`trace.cupti_api`), so the cost is the capture's."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device")
    x = torch.zeros(1, device="cuda")

    def run() -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            x.add_(1.0)
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / calls * 1e6

    run()  # warm-up: first launches, allocator
    plain, profiled = [], []
    for _ in range(rounds):
        plain.append(run())
        with profile(activities=[ProfilerActivity.CUDA]):
            if api_records == "launches":
                from membound.trace.cupti_api import keep_launches

                keep_launches()
            profiled.append(run())
    p, q = statistics.median(plain), statistics.median(profiled)
    return {
        "us_per_call": round(max(q - p, 0.0), 3),
        "plain_us": round(p, 3),
        "profiled_us": round(q, 3),
        "calls": calls,
        "rounds": rounds,
        "api_records": api_records,
    }


def probe(meta_path: str | Path, timeout: float = TIMEOUT_S, run=subprocess.run) -> str:
    """Measure in a process of its own and keep the result in the capture meta at
    `meta_path` under `META_KEY`; returns one sentence saying what happened."""
    path = Path(meta_path)
    meta, unread = meta_probe.read_meta(path, LABEL)
    if meta is None:
        return unread
    cmd = [sys.executable, "-m", "membound.trace.profiler_cost"]
    if capture_meta.recorded_launches_only(meta):  # measured as the capture recorded
        cmd.append("launches")
    result, why = meta_probe.run_json(cmd, timeout, run)
    if why is not None:
        return meta_probe.keep_failure(path, meta, META_KEY, LABEL, why)
    try:
        cost = float(result["us_per_call"])
    except (KeyError, TypeError, ValueError):
        return meta_probe.keep_failure(path, meta, META_KEY, LABEL, "the probe printed no JSON")
    meta_probe.keep(path, meta, META_KEY, result)
    return (
        f"measured the timeline profiler's host cost here: {cost:.1f} us per CUDA call "
        f"({result['plain_us']:.1f} us a launch without it, {result['profiled_us']:.1f} with)."
    )


def of(meta: Any) -> float | None:
    """The measured µs per call in a capture meta, or None."""
    return _measured(meta, "us_per_call", lambda v: v >= 0)


def launch_us(meta: Any) -> float | None:
    """The host time of one plain launch measured beside the profiler's cost (µs, the meta's
    `plain_us`: a Python-level op, dispatch and launch), or None."""
    return _measured(meta, "plain_us", lambda v: v > 0)


def _measured(meta: Any, key: str, valid) -> float | None:
    """The figure `key` of a capture meta's measurement, where it is a number `valid` accepts."""
    got = meta.get(META_KEY) if isinstance(meta, dict) else None
    try:
        value = float(got[key]) if isinstance(got, dict) else None
    except (KeyError, TypeError, ValueError):
        return None
    return value if value is not None and valid(value) else None


if __name__ == "__main__":
    from membound.defaults import API_RECORDS

    mode = (sys.argv[1:] or ["all"])[0]
    if mode not in API_RECORDS:
        sys.exit(f"profiler_cost: give one of {', '.join(API_RECORDS)}, not {mode!r}")
    print(json.dumps(measure(api_records=mode)), flush=True)
