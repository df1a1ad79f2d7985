"""membound's own step timer (trace/step_clock.py): phases, and what the process and the
training thread did in them."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from membound.trace.step_clock import USAGE_FIELDS, StepClock, usage_delta

needs_thread_usage = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="per-thread getrusage is Linux's"
)


def _burn(ms: float) -> None:
    """Burn `ms` of this thread's CPU time."""
    end = time.thread_time() + ms / 1e3
    while time.thread_time() < end:
        pass


@needs_thread_usage
def test_timed_phases_carry_the_usage_per_step():
    """wait=4: steps 1-3 unprofiled (boundaries 1 to 4), each burning 30 ms of the training
    thread's CPU while another thread burns 60 ms in the first of them; the phase's CPU time
    per step is 30 for the thread and 50 for the process. The profiled warm-up step (100 ms)
    counts in no phase, the recorded one (100 ms) in `profiled`, and membound's own work at
    the boundary that ends the recording (50 ms before `restart`) in none: neither the
    recorded step's nor the first step after it."""
    c = StepClock(wait=4, warmup=1, steps=1, after=2)
    c.start()
    c.mark()  # boundary 1: step 0 (warm-up) ends
    other = threading.Thread(target=_burn, args=(60,))
    other.start()
    for _ in range(3):
        _burn(30)
        c.mark()  # boundaries 2, 3, 4: the unprofiled steps
        other.join()
    for _ in range(2):  # warm-up and recorded (profiled) steps
        _burn(100)
        c.mark()
    _burn(50)
    c.restart()
    for _ in range(2):
        _burn(10)
        c.mark()
    thread, process = c.usage_per_step("thread"), c.usage_per_step("process")
    assert set(thread) == {"unprofiled", "profiled", "after"}
    assert set(thread["unprofiled"]) == {*USAGE_FIELDS, "cpu_ms_median"}
    assert thread["unprofiled"]["cpu_ms"] == pytest.approx(30, abs=6)
    assert process["unprofiled"]["cpu_ms"] == pytest.approx(50, abs=10)
    assert thread["profiled"]["cpu_ms"] == pytest.approx(100, abs=15)
    assert thread["after"]["cpu_ms"] == pytest.approx(10, abs=4)
    assert [len(v) for v in c.durations_ms().values()] == [3, 1, 2]
    assert [len(v) for v in c.cpu_ms().values()] == [3, 1, 2]
    assert thread["unprofiled"]["cpu_ms_median"] == pytest.approx(30, abs=6)
    assert "cpu_ms_median" not in process["unprofiled"]


@needs_thread_usage
def test_the_thread_cpu_median_leaves_one_heavy_step_out():
    """One unprofiled step burning 200 ms of CPU (a recompilation) among four of 5 ms: the
    phase's mean is 44 ms a step, its median step's CPU 5; `restart` starts the next step's CPU
    after membound's own work at the boundary."""
    c = StepClock(wait=6, warmup=0, steps=1, after=1)
    c.start()
    c.mark()  # boundary 1: the warm-up step ends
    for ms in (5, 200, 5, 5, 5):
        _burn(ms)
        c.mark()  # boundaries 2-6
    _burn(5)
    c.mark()  # the recorded step
    _burn(80)  # membound's work at the boundary
    c.restart()
    _burn(5)
    c.mark()
    thread = c.usage_per_step("thread")
    assert thread["unprofiled"]["cpu_ms"] == pytest.approx(44, abs=6)
    assert thread["unprofiled"]["cpu_ms_median"] == pytest.approx(5, abs=3)
    assert c.cpu_ms()["after"] == [pytest.approx(5, abs=3)]


def test_a_phase_without_both_edges_has_no_usage():
    c = StepClock(wait=3, warmup=0, steps=1, after=0)
    c.start()
    c.mark()
    c.mark()  # boundary 2: the wait's end (3) never comes
    assert c.usage_per_step() == {} and c.usage_per_step("thread") == {}
    assert usage_delta((), (1.0, 0, 0, 0, 0), 2) == {}
    assert usage_delta((1.0, 10, 0, 5, 1), (1.5, 30, 0, 9, 3), 2) == {
        "cpu_ms": 250.0, "minor_faults": 10.0, "major_faults": 0.0,
        "voluntary_switches": 2.0, "involuntary_switches": 1.0,
    }  # fmt: skip
