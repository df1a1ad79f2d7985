"""membound's own step timer (trace/step_clock.py): phases, and what the process did in them."""

from __future__ import annotations

import time

import pytest

from membound.trace.step_clock import USAGE_FIELDS, StepClock, usage_delta


def _burn(ms: float) -> None:
    end = time.process_time() + ms / 1e3
    while time.process_time() < end:
        pass


def test_unprofiled_phases_carry_the_process_usage_per_step():
    """wait=4: steps 1-3 unprofiled (boundaries 1 to 4), each burning 30 ms of CPU; the
    phase's CPU time per step is that, whatever the profiled steps in between did (200 ms
    burned there counts in no phase)."""
    c = StepClock(wait=4, warmup=1, steps=1, after=2)
    c.start()
    c.mark()  # boundary 1: step 0 (warm-up) ends
    for _ in range(3):
        _burn(30)
        c.mark()  # boundaries 2, 3, 4: the unprofiled steps
    for _ in range(2):  # warm-up and recorded (profiled) steps
        _burn(100)
        c.mark()
    _burn(50)  # membound's own work at the boundary that ends the recording
    c.restart()
    for _ in range(2):
        _burn(10)
        c.mark()
    got = c.usage_per_step()
    assert set(got) == {"unprofiled", "after"} and set(got["unprofiled"]) == set(USAGE_FIELDS)
    assert got["unprofiled"]["cpu_ms"] == pytest.approx(30, abs=8)
    assert got["after"]["cpu_ms"] == pytest.approx(10, abs=5)  # the 50 ms before restart: not
    assert [len(v) for v in c.durations_ms().values()] == [3, 1, 2]


def test_a_phase_without_both_edges_has_no_usage():
    c = StepClock(wait=3, warmup=0, steps=1, after=0)
    c.start()
    c.mark()
    c.mark()  # boundary 2: the wait's end (3) never comes
    assert c.usage_per_step() == {}
    assert usage_delta((), (1.0, 0, 0, 0, 0), 2) == {}
    assert usage_delta((1.0, 10, 0, 5, 1), (1.5, 30, 0, 9, 3), 2) == {
        "cpu_ms": 250.0, "minor_faults": 10.0, "major_faults": 0.0,
        "voluntary_switches": 2.0, "involuntary_switches": 1.0,
    }  # fmt: skip
