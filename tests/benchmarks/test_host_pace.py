"""benchmarks/host_pace.py: the host's pace in a recorded trace beside the overhead."""

from __future__ import annotations

import gzip
import json

import pytest

from membound.trace.capture_meta import timeline_in
from support.paths import FIXTURES, benchmark


def test_pace_of_a_hand_made_trace(tmp_path):
    """Two steps: thread 1 launches three kernels 10 us apart, each call taking 4 us; thread
    2's lone launch has no gap to another of its own, and its copy is no launch. GPU spans
    overlap (merged: 30 us busy over the two steps)."""
    api = [{"cat": "cuda_runtime", "name": "cudaLaunchKernel", "tid": 1, "ts": t, "dur": 4}
           for t in (0, 14, 28)]  # fmt: skip
    api.append({"cat": "cuda_runtime", "name": "cudaMemcpyAsync", "tid": 2, "ts": 5, "dur": 50})
    api.append({"cat": "cuda_driver", "name": "cuLaunchKernel", "tid": 2, "ts": 60, "dur": 4})
    gpu = [{"cat": "kernel", "name": "k", "ts": 10, "dur": 20},
           {"cat": "kernel", "name": "k", "ts": 20, "dur": 20}]  # fmt: skip
    trace = tmp_path / "trace.json.gz"
    trace.write_bytes(gzip.compress(json.dumps({"traceEvents": api + gpu}).encode()))
    meta = {"steps_captured": 2,
            "step_times_ms": {"unprofiled": [10.0, 12.0], "profiled": [11.0, 13.0]}}  # fmt: skip
    row = benchmark("host_pace").pace(trace, meta)
    assert row["unprofiled_ms"] == 11.0 and row["profiled_ms"] == 12.0
    assert row["overhead"] == pytest.approx(12 / 11 - 1)
    assert row["launch_us"] == 4 and row["gap_us"] == 10 and row["launches_per_step"] == 2
    assert row["busy_ms"] == pytest.approx(0.015)
    assert benchmark("host_pace").pace(trace, {"step_times_ms": {}}) is None


def test_pace_of_a_recorded_gpt2_run():
    """The eager GPT-2's seventh H200 run: +38% of overhead (as its report says: 133.4 ms
    unprofiled, 184.2 profiled) on 130.9 ms of GPU work a step,
    its host ~26.5 us from one launch to the next on the same thread (the first run's 13.4)."""
    d = FIXTURES / "h200_real_gpt2_run7"
    row = benchmark("host_pace").pace(timeline_in(d), json.loads((d / "capture.json").read_text()))
    assert row["unprofiled_ms"] == pytest.approx(133.445) and row["profiled_ms"] == pytest.approx(
        184.2428
    )
    assert row["overhead"] == pytest.approx(184.2428 / 133.445 - 1)
    assert row["busy_ms"] == pytest.approx(130.9, abs=0.5)
    assert row["gap_us"] == pytest.approx(26.5, abs=0.2)


def test_pace_by_thread_splits_launch_calls_from_the_work_between_them(tmp_path):
    """Thread 1 launches three times 10 us apart (calls of 4 us), then waits 500 us (a wait,
    not work) before a fourth; thread 2 launches twice. Per step (2 steps): thread 1 spends
    8 us in launches and 10 us in work gaps; its 500 us wait counts in neither."""
    api = [{"cat": "cuda_runtime", "name": "cudaLaunchKernel", "tid": 1, "ts": t, "dur": 4}
           for t in (0, 14, 28, 532)]  # fmt: skip
    api += [{"cat": "cuda_runtime", "name": "cudaLaunchKernel", "tid": 2, "ts": t, "dur": 6}
            for t in (5, 40)]  # fmt: skip
    gpu = [{"cat": "kernel", "name": "k", "ts": 10, "dur": 20}]
    trace = tmp_path / "trace.json.gz"
    trace.write_bytes(gzip.compress(json.dumps({"traceEvents": api + gpu}).encode()))
    meta = {"steps_captured": 2,
            "step_times_ms": {"unprofiled": [10.0, 12.0], "profiled": [11.0, 13.0]}}  # fmt: skip
    threads = benchmark("host_pace").pace(trace, meta)["threads"]
    assert list(threads) == [1, 2]  # busiest first
    one = threads[1]
    assert one["launches_per_step"] == 2 and one["launch_us"] == 4 and one["gap_us"] == 10
    assert one["in_launches_ms_per_step"] == pytest.approx(16 / 2 / 1e3)
    assert one["work_gaps_ms_per_step"] == pytest.approx(20 / 2 / 1e3)
    assert threads[2]["gap_us"] == 29 and threads[2]["work_gaps_ms_per_step"] == pytest.approx(
        29 / 2 / 1e3
    )
