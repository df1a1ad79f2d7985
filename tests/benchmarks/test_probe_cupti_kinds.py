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
