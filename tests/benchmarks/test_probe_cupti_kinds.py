"""benchmarks/probe_cupti_kinds.py: its windows read each thread's CPU, on any device."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

from support.paths import benchmark


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_window_reads_the_training_threads_cpu_per_step(monkeypatch, capsys):
    """Two plain windows of 3 steps, each step burning 4 ms of this thread's CPU: every
    window says 4+ ms of thread CPU a step and no autograd thread (none in this process),
    and the summary gives the medians and a growth of 0 over plain."""
    probe = benchmark("probe_cupti_kinds")
    monkeypatch.setitem(probe.PLAN, "window", 3)
    monkeypatch.setitem(probe.PLAN, "rounds", 2)
    monkeypatch.setitem(probe.PLAN, "variants", ["plain"])
    monkeypatch.setitem(probe.PLAN, "out", None)
    timer = probe.ProbeTimer("fake", SimpleNamespace(device="cpu", warmup_steps=1))
    for _ in range(timer.total_steps):
        _burn(0.004)
        timer.step()
    assert timer.done and len(timer.rows) == 2
    for row in timer.rows:
        assert 4.0 <= row["thread_cpu_ms"] <= row["step_ms"] + 0.5
        assert row["autograd_cpu_ms"] == 0.0
    summary = timer.report()["summary"]["plain"]
    assert summary["thread_cpu_ms_median"] >= 4.0
    assert summary["thread_cpu_ms_growth"] == 0.0 and summary["autograd_cpu_ms_growth"] == 0.0
    assert "PROBE_SUMMARY" in capsys.readouterr().out


def test_kineto_options_go_to_the_file_kineto_config_names(monkeypatch):
    probe = benchmark("probe_cupti_kinds")
    monkeypatch.delenv("KINETO_CONFIG", raising=False)
    got = probe.kineto_config(
        "CUPTI_PER_THREAD_BUFFER_ENABLED=true; ACTIVITIES_MAX_GPU_BUFFER_SIZE_MB=64"
    )
    assert got == {
        "CUPTI_PER_THREAD_BUFFER_ENABLED": "true",
        "ACTIVITIES_MAX_GPU_BUFFER_SIZE_MB": "64",
    }
    path = os.environ["KINETO_CONFIG"]
    with open(path) as f:
        assert f.read().splitlines() == [
            "CUPTI_PER_THREAD_BUFFER_ENABLED=true",
            "ACTIVITIES_MAX_GPU_BUFFER_SIZE_MB=64",
        ]


def test_kineto_knows_the_per_thread_buffer_option_of_this_torch():
    """torch 2.13's kineto (CI's) parses CUPTI_PER_THREAD_BUFFER_ENABLED, found in its
    binary; no kineto holds a made-up key."""
    import torch

    knows = benchmark("probe_cupti_kinds").kineto_knows(
        ["CUPTI_PER_THREAD_BUFFER_ENABLED", "MEMBOUND_NO_SUCH_KINETO_KEY"]
    )
    assert knows["MEMBOUND_NO_SUCH_KINETO_KEY"] is False
    if torch.__version__.startswith("2.13."):
        assert knows["CUPTI_PER_THREAD_BUFFER_ENABLED"] is True


def test_queued_stats_set_each_kernels_queued_time_against_its_launch_call():
    """Three kernels: two with a queued time (one launched by a recorded call ending 2 us
    after it), one without (CUPTI had none: 0)."""
    events = [
        {"cat": "cuda_runtime", "ph": "X", "name": "cudaLaunchKernel", "ts": 100, "dur": 5,
         "args": {"correlation": 1}},
        {"cat": "cuda_runtime", "ph": "X", "name": "cudaMemcpyAsync", "ts": 200, "dur": 9,
         "args": {"correlation": 2}},
        {"cat": "kernel", "ph": "X", "name": "k1", "ts": 110, "dur": 3,
         "args": {"correlation": 1, "queued": 103}},
        {"cat": "kernel", "ph": "X", "name": "k2", "ts": 150, "dur": 3,
         "args": {"correlation": 7, "queued": 140}},
        {"cat": "kernel", "ph": "X", "name": "k3", "ts": 160, "dur": 3,
         "args": {"correlation": 8, "queued": 0}},
    ]  # fmt: skip
    got = benchmark("probe_cupti_kinds").queued_stats(events)
    assert got == {"kernels": 3, "with_queued": 2, "call_end_minus_queued_us": 2,
                   "start_minus_queued_us": 8.5}  # fmt: skip


def test_the_latency_variants_are_known():
    variants = benchmark("probe_cupti_kinds").VARIANTS
    assert "+latency" in variants["queued"] and "+latency" in variants["noapi_queued"]
    assert {"driver", "runtime"} <= set(variants["noapi_queued"])


def test_a_latency_windows_trace_is_kept_gzipped_when_asked(tmp_path, monkeypatch):
    import gzip

    probe = benchmark("probe_cupti_kinds")
    src = tmp_path / "t.json"
    src.write_text('{"traceEvents": []}')
    monkeypatch.setitem(probe.PLAN, "keep_traces", None)
    assert probe.keep_trace(str(src), "t5_seq2seq", "noapi_queued") is None
    monkeypatch.setitem(probe.PLAN, "keep_traces", str(tmp_path / "kept"))
    out = probe.keep_trace(str(src), "t5_seq2seq", "noapi_queued")
    assert out == str(tmp_path / "kept" / "t5_seq2seq_noapi_queued.json.gz")
    with gzip.open(out, "rt") as f:
        assert f.read() == '{"traceEvents": []}'


def test_the_syncs_variant_keeps_what_the_idle_causes_need_and_no_launch():
    """`syncs_queued` records syncs, memcpys and memsets, not kernel launches (a graph launch
    stays: a replay's kernels have no launch call of their own)."""
    probe = benchmark("probe_cupti_kinds")
    from membound.trace.kineto_names import api_kept

    def keep(n):
        return api_kept(n) and not probe.launch_call(n)

    assert not keep("cudaLaunchKernel_v7000") and not keep("cuLaunchKernelEx")
    assert keep("cudaGraphLaunch_v10000") and keep("cudaStreamSynchronize_v3020")
    assert keep("cudaMemcpyAsync_v3020") and keep("cudaMemsetAsync_v3020")
    assert not keep("cudaGetDevice_v3020")


def test_the_launches_variant_without_driver_records_applies_the_filter_then_the_kind(
    monkeypatch,
):
    """`launches_nodriver` switches membound's per-function filter on and then the whole driver
    kind off, in that order (switching a kind on again would forget the filter)."""
    probe = benchmark("probe_cupti_kinds")
    import membound.trace.cupti_api as cupti_api

    done = []
    monkeypatch.setattr(
        cupti_api, "keep_launches", lambda **_: done.append("filter") or {"applied": True}
    )

    class Lib:
        def cuptiActivityDisable(self, kind):
            done.append(kind.value)
            return 0

    class Prof:
        def __init__(self, **_):
            pass

        def start(self):
            done.append("start")

    import torch.profiler

    monkeypatch.setattr(torch.profiler, "profile", Prof)
    monkeypatch.setattr(probe, "libcupti", lambda: Lib())
    timer = probe.ProbeTimer.__new__(probe.ProbeTimer)
    timer._cap = timer._prof = None
    timer.counted = set()
    timer._begin_profiler("launches_nodriver")
    assert done == ["start", "filter", probe.KINDS["driver"]]
