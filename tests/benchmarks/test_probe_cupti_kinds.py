"""benchmarks/probe_cupti_kinds.py: its windows read each thread's CPU, on any device."""

from __future__ import annotations

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
