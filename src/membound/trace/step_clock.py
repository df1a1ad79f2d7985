"""membound's own step timer: the host's clock at every step boundary, and on CUDA the GPU's
(an event recorded on the loop's stream, no sync, no profiler), so the steps that run without
the profiler are timed as the user runs them.

Step `s` (0-based) runs from boundary `s` to boundary `s + 1`; boundary 0 is when the capture
starts. The capture's schedule names the phases: `wait` steps unprofiled (the first is
warm-up — compilation, autotuning, allocator growth — and is not timed), `warmup` steps
profiled and discarded, `steps` profiled and recorded, then up to `after` steps unprofiled
again. A host timestamp measures the host's step period. That is the loop's own period only
where the host keeps pace with the GPU: a GPU-bound loop that syncs every few steps (a
Trainer that syncs only when it logs) lets the host run ahead between syncs and catch up in
the step that syncs, so the median host step is the host's pace, not the loop's (issue 15;
the timeline's steps had the same fault, `analysis.timeline.gpu_clock`). So on CUDA each
boundary also records an event on the loop's current stream (`record`, a few microseconds,
no sync): the time between two of them is the step on the GPU's clock, the loop's period
however far the host runs ahead (`gpu_durations_ms`). The events are read once the GPU has
passed them (`settle` waits for the last one in membound's own work at a boundary, which the
host clock leaves out). The median over steps is the figure reported; the first timed step
may still carry warm-up.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from membound.trace import children

try:  # POSIX: what the process did besides (CPU time, page faults, context switches)
    import resource
except ImportError:  # pragma: no cover - Windows has no getrusage
    resource = None  # type: ignore[assignment]

#: a CUDA loop's autograd threads are looked for at its boundaries up to this one (the
#: first backward runs in step 0 or, where a DataLoader marks the first boundary, step 1)
SCAN_BOUNDARIES = 4
#: phases of a capture, in order ("slept": the unprofiled steps at the end of the wait whose
#: syncs sleep, `--syncs sleep-profiled`; only where `StepClock.slept` asks for them)
PHASES = ("unprofiled", "slept", "profiled", "after")


@dataclass
class StepClock:
    wait: int
    warmup: int
    steps: int
    after: int
    #: profiled steps after the recorded ones, timed in no phase (the ops pass)
    extra: int = 0
    #: the last steps of the wait, timed as their own phase ("slept": `--syncs
    #: sleep-profiled` makes their syncs sleep); 0: none, the whole wait is "unprofiled"
    slept: int = 0
    times: list[float] = field(default_factory=list)  # perf_counter() at each boundary
    #: the process's and the training thread's resource usage and the child processes' CPU
    #: seconds (`_usage`, `USAGE_OF`) at the boundaries that open or close a timed phase,
    #: taken when the boundary is marked
    usage: dict[int, tuple] = field(default_factory=dict)
    #: the same, taken again by `restart` (after membound's own work at that boundary): where
    #: the phase that starts there begins
    resumed: dict[int, tuple] = field(default_factory=dict)
    #: the marking thread's CPU seconds (`time.thread_time`, well under a microsecond) at each
    #: boundary, beside `times`: each step's own CPU time, so that a phase's median step has a
    #: median CPU time beside it (a compile or a recompilation inside a phase drags its mean)
    cpu: list[float] = field(default_factory=list)
    #: records a GPU event on the loop's current stream and returns it (an object with
    #: `query()`, `synchronize()` and `elapsed_time(later)`, as `torch.cuda.Event`), or None
    #: where it cannot (a stream being captured into a CUDA graph); None: host clock only
    record: Callable[[], Any] | None = None
    #: the event recorded at each boundary, beside `times` (None where none was)
    gpu: list[Any] = field(default_factory=list)
    #: PyTorch's autograd device threads (`pt_autograd_<device>`: on CUDA, backward runs
    #: there while the training thread waits) by thread id, each with its CPU clock's id
    helpers: dict[int, int] = field(default_factory=dict)
    #: the helpers' CPU seconds together at each boundary, beside `cpu` (nan where unread)
    helper_cpu: list[float] = field(default_factory=list)

    def start(self) -> None:
        self.times = [time.perf_counter()]
        self.cpu = [time.thread_time()]
        self.gpu = [self._event()]
        self.helpers = autograd_threads()
        self.helper_cpu = [self._helper_time()]
        self.usage = {}
        self.resumed = {}

    def _helper_time(self) -> float:
        """The autograd threads' CPU seconds together; nan where there are none or one ended."""
        if not self.helpers:
            return float("nan")
        try:
            return sum(time.clock_gettime(c) for c in self.helpers.values())
        except OSError:
            return float("nan")

    def _event(self) -> Any:
        if self.record is None:
            return None
        try:
            return self.record()
        except Exception:  # noqa: BLE001 - the GPU clock is a second opinion; never break a loop
            return None

    def mark(self) -> int:
        """Record a boundary; returns it in `time.perf_counter_ns` units."""
        t = time.perf_counter_ns()
        self.times.append(t / 1e9)
        self.cpu.append(time.thread_time())
        self.gpu.append(self._event())
        self.helper_cpu.append(self._helper_time())
        if len(self.times) - 1 in self._edges():  # getrusage ~2 us; the children ~0.5 ms
            self.usage[len(self.times) - 1] = _usage()
        if not self.helpers and self.record is not None and len(self.times) <= SCAN_BOUNDARIES:
            # the autograd threads start with the first backward on the GPU, which may come
            # after the first boundary (a DataLoader's, before the step's backward): looked
            # for at the first few boundaries of a CUDA loop until found (~0.1-0.5 ms each)
            self.helpers = autograd_threads()
            self.helper_cpu[-1] = self._helper_time()
        return t

    def spans(self) -> dict[str, tuple[int, int]]:
        """{phase: (the boundary that opens it, the one that closes it)} of the timed phases,
        in order: the unprofiled steps before the capture (the last `slept` of them apart,
        where asked for), the recorded (profiled) steps, the unprofiled ones after it."""
        recording = self.wait + self.warmup
        done = recording + self.steps + self.extra
        spin_end = max(self.wait - self.slept, 1)
        out = {"unprofiled": (1, spin_end)}
        if self.slept:
            out["slept"] = (spin_end, self.wait)
        out["profiled"] = (recording, recording + self.steps)
        out["after"] = (done, done + self.after)
        return out

    def _edges(self) -> tuple[int, ...]:
        """The boundaries that open and close the timed phases (`spans`), in pairs."""
        return tuple(b for span in self.spans().values() for b in span)

    def restart(self) -> None:
        """The step after the last boundary starts now: membound's own work at that boundary
        (stopping the profiler, writing the trace) is no part of it."""
        self.times[-1] = time.perf_counter()
        self.cpu[-1] = time.thread_time()
        if self.gpu:
            self.gpu[-1] = self._event()
        if self.helper_cpu:
            self.helper_cpu[-1] = self._helper_time()
        if len(self.times) - 1 in self.usage:  # nor in what the process did in the phase
            self.resumed[len(self.times) - 1] = _usage()

    def phase(self, s: int) -> str | None:
        """The phase of step `s`, None for steps that are not timed."""
        for name, (a, b) in self.spans().items():
            if a <= s < b:
                return name
        return None

    def durations_ms(self) -> dict[str, list[float]]:
        """Milliseconds of every complete timed step, by phase."""
        return self._by_phase(self.times)

    def cpu_ms(self) -> dict[str, list[float]]:
        """The marking thread's CPU milliseconds in every complete timed step, by phase (the
        steps of `durations_ms`)."""
        return self._by_phase(self.cpu)

    def settle(self) -> None:
        """Wait until the GPU has passed the last boundary's event: called at membound's own
        work at a boundary (the end of a phase, before `restart`), never inside a timed step."""
        last = next((e for e in reversed(self.gpu) if e is not None), None)
        if last is not None:
            try:
                last.synchronize()
            except Exception:  # noqa: BLE001 - a broken context: the host clock remains
                pass

    def gpu_durations_ms(self) -> dict[str, list[float]]:
        """Milliseconds of every complete timed step on the GPU's clock, by phase: the time
        between the events of its two boundaries, for steps whose events both exist and the GPU
        has passed; {} without GPU events. A phase with a step missing here is shorter than
        its `durations_ms` list (the reader then keeps the host's)."""
        ev = self.gpu
        if not any(e is not None for e in ev):
            return {}
        done = [e is not None and _passed(e) for e in ev]
        out: dict[str, list[float]] = {p: [] for p in self.spans()}
        for s in range(len(ev) - 1):
            p = self.phase(s)
            if p is not None and done[s] and done[s + 1]:
                try:
                    out[p].append(round(float(ev[s].elapsed_time(ev[s + 1])), 4))
                except Exception:  # noqa: BLE001 - e.g. events of two devices
                    continue
        return out

    def _by_phase(self, at: list[float]) -> dict[str, list[float]]:
        """Each complete timed step's growth of `at` (seconds at each boundary: `times` or
        `cpu`), in ms, by phase."""
        out: dict[str, list[float]] = {p: [] for p in self.spans()}
        for s in range(len(at) - 1):
            p = self.phase(s)
            if p is not None:
                out[p].append(round((at[s + 1] - at[s]) * 1e3, 4))
        return out

    def usage_per_step(self, who: str = "process") -> dict[str, dict[str, float]]:
        """Per timed phase whose edges were both marked: what the process (`who` "process":
        all its threads) or the training thread (`who` "thread": the one that marks the
        steps) did per step (`usage_delta`), beside the step times. Where the loop's own
        timer (or a run of the same script alone) saw a faster step, these say whether this
        run was busier or more contended: a thread that shares its core gets involuntary
        switches, a process whose memory is new to it page faults. The recorded steps'
        (`profiled`) against the unprofiled ones' is the host work the profiler added, which
        wall-clock steps show only where the host paces the loop. A phase starts where
        `restart` left its first boundary, and ends where its last one was marked (before
        membound's work there). The thread's also carry `cpu_ms_median`, the median of its steps'
        own CPU times (`cpu_ms`): the figure to set beside a median step."""
        k = USAGE_OF.index(who)
        per_step = self.cpu_ms() if who == "thread" else {}
        helper = self._by_phase(self.helper_cpu) if who == "thread" else {}
        out = {}
        for phase, (a, b) in self.spans().items():
            start = self.resumed.get(a, self.usage.get(a))
            if b > a and start is not None and b in self.usage:
                got = usage_delta(start[k], self.usage[b][k], b - a)
                if got and per_step.get(phase):
                    got["cpu_ms_median"] = round(statistics.median(per_step[phase]), 4)
                    both = [
                        a + b
                        for a, b in zip(per_step[phase], helper.get(phase, ()), strict=False)
                        if b == b  # nan: the autograd threads were not read at both ends
                    ]
                    if len(both) >= max(1, len(per_step[phase]) // 2):
                        # the training thread with the autograd threads it waits for: the
                        # host work that launches the step's GPU work, a median step's (of
                        # the steps after the threads were found)
                        got["launchers_cpu_ms_median"] = round(statistics.median(both), 4)
                if got:
                    out[phase] = got
        return out

    def children_per_step(self) -> dict[str, dict[str, float]]:
        """Per timed phase whose edges were both read: the child processes' CPU per step, how
        many were alive at its end and how many cores they kept busy (`children.delta`);
        {} off Linux. A DataLoader's workers are these children: their CPU is the batches'
        cost, which the process's own figures never hold."""
        k = USAGE_OF.index("children")
        out = {}
        for phase, (a, b) in self.spans().items():
            start = self.resumed.get(a, self.usage.get(a))
            if b > a and start is not None and b in self.usage:
                wall_ms = (self.times[b] - self.times[a]) * 1e3
                got = children.delta(start[k], self.usage[b][k], b - a, wall_ms)
                if got is not None:
                    out[phase] = got
        return out


#: `usage_delta`'s keys, from `resource.getrusage` fields
USAGE_FIELDS = ("cpu_ms", "minor_faults", "major_faults", "voluntary_switches",
                "involuntary_switches")  # fmt: skip
#: whose usage a `_usage()` snapshot holds, in order (the children's is
#: `trace.children.snapshot`'s {pid: CPU seconds}, or None)
USAGE_OF = ("process", "thread", "children")


def _usage() -> tuple:
    """(this process's figures, all its threads; the calling thread's; its children's): the
    first two each (CPU seconds, minor faults, major faults, voluntary and involuntary context
    switches), () where getrusage (or, off Linux, the per-thread kind) is missing; the third
    `trace.children.snapshot()` (a DataLoader's workers' CPU seconds by pid, None off Linux)."""
    kids = children.snapshot()
    if resource is None:
        return ((), (), kids)
    out = []
    for who in (resource.RUSAGE_SELF, getattr(resource, "RUSAGE_THREAD", None)):
        if who is None:
            out.append(())
            continue
        r = resource.getrusage(who)
        out.append((r.ru_utime + r.ru_stime, r.ru_minflt, r.ru_majflt, r.ru_nvcsw, r.ru_nivcsw))
    return (*out, kids)


def usage_delta(a: tuple, b: tuple, steps: int) -> dict[str, Any]:
    """`USAGE_FIELDS` per step between two snapshots of one kind ({} where one is empty)."""
    if not a or not b or steps <= 0:
        return {}
    d = [y - x for x, y in zip(a, b, strict=True)]
    d[0] *= 1e3  # seconds -> ms
    return {k: round(v / steps, 4) for k, v in zip(USAGE_FIELDS, d, strict=True)}


def autograd_threads() -> dict[int, int]:
    """{thread id: its CPU clock's id} of this process's autograd device threads (Linux:
    `/proc/self/task/*/comm` named `pt_autograd_<n>`); {} elsewhere or where there are none."""
    out = {}
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return out
    for t in tasks:
        try:
            with open(f"/proc/self/task/{t}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        if name.startswith("pt_autograd"):
            clock = thread_cpu_clock(int(t))
            try:
                time.clock_gettime(clock)
            except (OSError, ValueError, OverflowError):
                continue
            out[int(t)] = clock
    return out


def thread_cpu_clock(tid: int) -> int:
    """The CPU-time clock id of thread `tid` of this process (Linux's MAKE_THREAD_CPUCLOCK:
    its scheduler clock, per thread), for `time.clock_gettime`."""
    return ((~tid) << 3) | 6


def gpu_event_recorder(torch: Any) -> Callable[[], Any]:
    """`StepClock.record` for CUDA: a timing event recorded on the calling thread's current
    stream, None while that stream is being captured into a CUDA graph (recording a timing
    event there is an error)."""
    cuda = torch.cuda

    def record() -> Any:
        if cuda.is_current_stream_capturing():
            return None
        event = cuda.Event(enable_timing=True)
        event.record()
        return event

    return record


def _passed(event: Any) -> bool:
    """The GPU has passed `event` (False where it cannot say)."""
    try:
        return bool(event.query())
    except Exception:  # noqa: BLE001
        return False


def median_or_none(values: list[float]) -> float | None:
    return statistics.median(values) if values else None
