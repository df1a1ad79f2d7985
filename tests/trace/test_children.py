"""trace.children: the child processes' CPU (a DataLoader's workers) and the usable cores."""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time

import pytest

from membound.trace import children
from membound.trace.step_clock import StepClock

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _fake_proc(tmp_path, kids: dict[int, tuple[int, int]], tasks=(1, 2)):
    """A /proc of one process whose threads `tasks` started `kids` {pid: (utime, stime)}."""
    me = tmp_path / "self"
    for i, t in enumerate(tasks):
        d = me / "task" / str(t)
        d.mkdir(parents=True)
        mine = [str(p) for j, p in enumerate(sorted(kids)) if j % len(tasks) == i]
        (d / "children").write_text(" ".join(mine) + (" " if mine else ""))
    for pid, (u, s) in kids.items():
        d = tmp_path / str(pid)
        d.mkdir()
        # a command name with a space and a parenthesis: fields start after the last ')'
        fields = ["S", "1", "1", "1", "0", "-1", "0", "0", "0", "0", "0", str(u), str(s), "0"]
        (d / "stat").write_text(f"{pid} (pt worker (x)) " + " ".join(fields) + "\n")
    return str(me), str(tmp_path)


def test_snapshot_reads_every_threads_children_and_their_cpu(tmp_path):
    tick = children._TICKS
    me, root = _fake_proc(tmp_path, {101: (2 * tick, tick), 102: (tick, 0), 103: (0, 0)})
    snap = children.snapshot(me, root)
    assert snap == {101: 3.0, 102: 1.0, 103: 0.0}


def test_snapshot_is_none_without_proc(tmp_path):
    assert children.snapshot(str(tmp_path / "nowhere"), str(tmp_path)) is None
    assert children.cpu_seconds(999, str(tmp_path)) is None


def test_delta_counts_growth_new_children_and_busy_cores():
    a = {1: 10.0, 2: 5.0, 3: 7.0}
    b = {1: 10.4, 2: 5.0, 4: 0.2}  # 2 idle, 3 exited, 4 started between
    d = children.delta(a, b, steps=4, wall_ms=200.0)
    assert d == {"cpu_ms": 150.0, "processes": 3, "working": 2, "busy_cores": 3.0}
    assert children.delta(None, b, 4, 200.0) is None
    assert children.delta(a, b, 0, 200.0) is None


def test_usable_cores_capped_by_a_cgroup_quota(tmp_path):
    q = tmp_path / "cpu.max"
    q.write_text("150000 100000\n")
    assert children.usable_cores(str(q)) == pytest.approx(
        min(1.5, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1.5)
    )
    q.write_text("max 100000\n")
    n = children.usable_cores(str(q))
    assert n is not None and n >= 1 and n == int(n)
    assert children.usable_cores(str(tmp_path / "missing")) == n


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


@linux
def test_a_live_childs_cpu_is_seen():
    ctx = mp.get_context("spawn")
    p = ctx.Process(target=_burn, args=(0.6,))
    p.start()
    try:
        a = children.snapshot()
        assert a is not None and p.pid in a
        t0 = time.perf_counter()
        time.sleep(0.4)
        b = children.snapshot()
        d = children.delta(a, b, steps=2, wall_ms=(time.perf_counter() - t0) * 1e3)
        # the child spins: it used most of a core for the 0.4 s (its start-up may eat some)
        assert d["processes"] >= 1 and d["working"] >= 1
        assert 0.2 < d["busy_cores"] < 1.6 and d["cpu_ms"] > 50
    finally:
        p.join(10)


@linux
def test_step_clock_keeps_the_childrens_cpu_per_phase():
    ctx = mp.get_context("spawn")
    p = ctx.Process(target=_burn, args=(3.0,))
    p.start()
    try:
        time.sleep(0.3)  # its interpreter up
        clock = StepClock(wait=3, warmup=0, steps=2, after=0)
        clock.start()
        for _ in range(5):
            time.sleep(0.1)
            clock.mark()
        per = clock.children_per_step()
        assert set(per) == {"unprofiled", "profiled"}
        for phase in per.values():  # one spinning child: about one core, 100 ms a step
            assert phase["processes"] >= 1
            assert 0.4 < phase["busy_cores"] < 1.6
            assert 40 < phase["cpu_ms"] < 160
    finally:
        p.terminate()
        p.join(10)


def test_step_clock_without_children_reports_none_working():
    clock = StepClock(wait=2, warmup=0, steps=1, after=0)
    clock.start()
    for _ in range(3):
        clock.mark()
    for phase in clock.children_per_step().values():
        assert phase["cpu_ms"] >= 0 and phase["busy_cores"] >= 0
