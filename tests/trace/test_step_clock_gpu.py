"""The step timer's GPU clock (trace/step_clock.py `record`, `gpu_durations_ms`, `settle`) and
its reading (analysis/step_timing.py): a host that runs ahead of the GPU between syncs times
its own pace, the events on the loop's stream time the loop's."""

from __future__ import annotations

import statistics
import sys
import threading
import time

import pytest
import torch

from membound.analysis.step_timing import StepTiming
from membound.trace.step_clock import StepClock, gpu_event_recorder


class FakeEvent:
    """A GPU event at GPU time `t` (ms), passed once `gpu.now >= t`."""

    def __init__(self, gpu, t):
        self.gpu, self.t = gpu, t

    def query(self):
        return self.gpu.now >= self.t

    def synchronize(self):
        self.gpu.synced.append(self.t)
        self.gpu.now = max(self.gpu.now, self.t)

    def elapsed_time(self, later):
        assert self.query() and later.query(), "elapsed_time of an event not passed"
        return later.t - self.t


class FakeGpu:
    """Hands out events at the GPU times of `times` (ms), in order."""

    def __init__(self, times):
        self.times, self.now, self.synced = list(times), 0.0, []

    def record(self):
        t = self.times.pop(0)
        return None if t is None else FakeEvent(self, t)


def _clock(gpu_times, wait=4, steps=2, after=2):
    c = StepClock(wait=wait, warmup=1, steps=steps, after=after, record=FakeGpu(gpu_times).record)
    return c


def _run(c, n):
    c.start()
    for _ in range(n):
        c.mark()


def test_gpu_durations_are_the_events_gaps_by_phase():
    """wait=4, warmup=1, steps=2, after=2: boundaries 0..9. The GPU passes boundary b at
    the times below; each phase's steps are the gaps between its boundaries' events, as the
    host's are between its timestamps."""
    at = [0, 100, 180, 260, 340, 440, 520, 600, 690, 780]
    c = _clock(at)
    _run(c, 9)
    c.record.__self__.now = 1e9  # the GPU has passed everything
    got = c.gpu_durations_ms()
    assert got == {"unprofiled": [80, 80, 80], "profiled": [80, 80], "after": [90, 90]}
    host = c.durations_ms()
    assert [len(host[p]) for p in ("unprofiled", "profiled", "after")] == [3, 2, 2]


def test_steps_the_gpu_has_not_passed_are_left_out_until_settled():
    at = [0, 100, 180, 260, 340, 440, 520, 600, 690, 780]
    c = _clock(at)
    _run(c, 9)
    gpu = c.record.__self__
    gpu.now = 300  # boundaries 0-3 passed: steps 1 and 2 of `unprofiled` only
    assert c.gpu_durations_ms()["unprofiled"] == [80, 80]
    assert c.gpu_durations_ms()["after"] == []
    c.settle()  # waits for the last boundary's event: every earlier one has passed too
    assert gpu.synced == [780]
    assert c.gpu_durations_ms()["after"] == [90, 90]


def test_restart_records_the_boundary_again():
    """membound's own work at a boundary (writing the trace) is no part of the next step on
    either clock: `restart` replaces the boundary's event."""
    at = [0, 10, 20, 30, 40, 50, 60, 70, 500, 510, 520]
    c = _clock(at)
    _run(c, 7)  # boundaries 0..7: recording ends at 7
    c.restart()  # the event at GPU time 500 replaces 70
    c.mark()
    c.mark()
    c.record.__self__.now = 1e9
    assert c.gpu_durations_ms()["after"] == [10, 10]


def test_no_event_no_gpu_clock():
    """A boundary without an event (a stream being captured into a CUDA graph, a recorder
    that raised) leaves the steps on each side of it out; a clock without a recorder has
    none at all."""
    at = [0, 100, None, 260, 340, 440, 520, 600, 690, 780]
    c = _clock(at)
    _run(c, 9)
    c.record.__self__.now = 1e9
    assert c.gpu_durations_ms()["unprofiled"] == [80]

    def broken():
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    c = StepClock(wait=4, warmup=1, steps=2, after=2, record=broken)
    _run(c, 9)
    c.settle()
    assert c.gpu_durations_ms() == {}
    c = StepClock(wait=4, warmup=1, steps=2, after=2)
    _run(c, 9)
    c.settle()
    assert c.gpu_durations_ms() == {} and c.gpu == [None] * 10


def _meta(host, gpu):
    return {
        "step_times_ms": {"unprofiled": host, "profiled": [95.0, 94.0, 96.0], "after": []},
        "gpu_step_times_ms": {"unprofiled": gpu, "profiled": [93.0, 94.0, 95.0], "after": []},
    }


def test_the_unprofiled_step_is_read_on_the_gpus_clock():
    """A host that ran ahead between syncs: its steps have a median of 72.9 ms, the one that
    syncs caught up (152.5), the GPU ran every step in ~80.7. With every step read on the
    GPU's clock, that is the step reported, and the note says the host ran ahead."""
    host = [71.4, 71.7, 70.5, 70.8, 70.9, 72.9, 77.6, 77.3, 73.7, 78.5, 152.5]
    gpu = [80.1, 80.9, 80.4, 81.0, 80.7, 80.6, 80.8, 81.2, 80.2, 80.9, 80.5]
    t = StepTiming.from_meta(_meta(host, gpu))
    assert t.unprofiled_median_ms == pytest.approx(80.7)
    assert t.profiled_median_ms == pytest.approx(94.0)  # the profiled phase's GPU clock
    assert t.host_ms == host
    note = t.note()
    assert "on the GPU's clock" in note and "host's own step marks had a median of 72.90" in note


def test_a_phase_the_gpu_clock_missed_steps_of_stays_on_the_hosts():
    host = [71.4, 71.7, 70.5, 70.8]
    t = StepTiming.from_meta(_meta(host, [80.1, 80.9, 80.4]))
    assert t.unprofiled_median_ms == pytest.approx(statistics.median(host))
    assert t.host_ms == [] and "GPU's clock" not in t.note()


def test_clocks_that_agree_say_nothing_of_a_host_ahead():
    host = [80.0, 81.0, 80.5]
    t = StepTiming.from_meta(_meta(host, [80.2, 80.9, 80.4]))
    assert t.host_ms == host and "ran ahead" not in t.note()


def test_a_meta_without_gpu_times_reads_as_before():
    meta = {"step_times_ms": {"unprofiled": [10.0, 11.0], "profiled": [12.0], "after": []}}
    t = StepTiming.from_meta(meta)
    assert t.unprofiled_median_ms == 10.5 and t.host_ms == []


@pytest.mark.gpu
def test_cuda_events_time_a_loop_whose_host_runs_ahead():
    """A loop that syncs every 8 steps and queues ~4 ms of GPU work a step with almost no host
    work: the host's steps are short except the syncing one, the GPU's are the loop's period
    (the window's wall time / its steps, synchronized at both ends)."""
    x = torch.randn(4096, 4096, device="cuda")
    c = StepClock(wait=17, warmup=0, steps=0, after=0, record=gpu_event_recorder(torch))

    def work():
        for _ in range(3):
            x @ x

    for _ in range(3):
        work()
    torch.cuda.synchronize()
    c.start()
    t0 = time.perf_counter()
    for s in range(16):
        work()
        if s % 8 == 7:
            torch.cuda.synchronize()  # the loop's own sync, as a logging step
        c.mark()
    period = (time.perf_counter() - t0) * 1e3 / 16
    c.settle()
    gpu = c.gpu_durations_ms()["unprofiled"]
    host = c.durations_ms()["unprofiled"]
    assert len(gpu) == len(host) == 15
    assert statistics.median(gpu) == pytest.approx(period, rel=0.1)
    assert statistics.median(host) < 0.5 * period


# ---- the autograd threads' CPU time: backward's host work on CUDA -------------------------


def _named_burner(name, go, stop, ms_per_go):
    """A thread whose OS name is `name` (as PyTorch names its autograd threads), burning
    `ms_per_go` of CPU each time `go` is set."""
    import ctypes

    def run():
        libc = ctypes.CDLL(None)
        libc.prctl(15, name.encode(), 0, 0, 0)  # PR_SET_NAME
        while not stop.is_set():
            if go.wait(0.01):
                go.clear()
                end = time.thread_time() + ms_per_go / 1e3
                while time.thread_time() < end:
                    pass
                done.set()

    done = threading.Event()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, done


needs_linux = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="thread names and CPU clocks of /proc"
)


@needs_linux
def test_launchers_cpu_adds_the_autograd_threads():
    """A training thread burning 10 ms a step and waiting on a `pt_autograd_0` thread that
    burns 20 (as backward on CUDA): the thread's own CPU per step is ~10, with the autograd
    thread's ~30. The thread starts after the first boundary (a DataLoader's marks it before
    the first backward) and is found at the next; the steps before lack its figure."""
    from membound.trace.step_clock import autograd_threads

    go, stop = threading.Event(), threading.Event()
    c = StepClock(wait=6, warmup=0, steps=0, after=0, record=lambda: None)  # a CUDA loop's
    c.start()
    c.mark()
    assert c.helpers == {}
    t, done = _named_burner("pt_autograd_0", go, stop, 20)
    try:
        deadline = time.time() + 2
        while not autograd_threads() and time.time() < deadline:
            time.sleep(0.01)
        for _ in range(5):
            end = time.thread_time() + 0.010
            while time.thread_time() < end:
                pass
            done.clear()
            go.set()
            assert done.wait(2)
            c.mark()
    finally:
        stop.set()
        t.join(2)
    assert len(c.helpers) == 1
    assert [v != v for v in c.helper_cpu] == [True, True, False, False, False, False, False]
    usage = c.usage_per_step("thread")["unprofiled"]
    assert usage["cpu_ms_median"] == pytest.approx(10, abs=3)
    assert usage["launchers_cpu_ms_median"] == pytest.approx(30, abs=5)


def test_no_autograd_thread_no_launchers_figure(monkeypatch):
    """Without an autograd thread (a CPU loop: backward runs in the training thread) the
    training thread's CPU is all there is, and no `launchers` figure is made."""
    from membound.trace import step_clock

    monkeypatch.setattr(step_clock, "autograd_threads", lambda: {})
    c = StepClock(wait=3, warmup=0, steps=0, after=0)
    c.start()
    for _ in range(3):
        c.mark()
    usage = c.usage_per_step("thread")["unprofiled"]
    assert c.helpers == {} and "cpu_ms_median" in usage
    assert "launchers_cpu_ms_median" not in usage


def test_host_floor_is_the_launchers_cpu_less_the_waiting():
    from membound.analysis.gpu_whatif import host_floor

    meta = {
        "step_times_ms": {"unprofiled": [69.0, 68.9, 69.1], "profiled": [81.0], "after": []},
        "thread_per_step": {
            "unprofiled": {"cpu_ms": 48.0, "cpu_ms_median": 47.8, "launchers_cpu_ms_median": 66.0}
        },
    }
    t = StepTiming.from_meta(meta)
    assert t.launchers_cpu == 66.0 and t.thread_cpu_ms["unprofiled"] == 47.8
    assert host_floor(t, 3.0, 69.0) == pytest.approx(63.0)
    assert host_floor(t, 0.0, 60.0) is None  # not below the step: no floor
    assert host_floor(t, 70.0, 69.0) is None
    # with sleeping syncs the CPU time is host work: no waiting to take off
    slept = StepTiming.from_meta({**meta, "sleeping_syncs": "ok"})
    assert host_floor(slept, 3.0, 69.0) == pytest.approx(66.0)
    del meta["thread_per_step"]["unprofiled"]["launchers_cpu_ms_median"]
    assert host_floor(StepTiming.from_meta(meta), 3.0, 69.0) is None
