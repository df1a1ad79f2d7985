"""The CPU the script's child processes use (a DataLoader's workers), and the cores it may use.

A worker-fed loader's batches cost CPU in the workers, which the process's own `getrusage`
never counts: a live child's time reaches `RUSAGE_CHILDREN` only once it has exited and been
waited for. Whether more workers can feed the GPU faster depends on that CPU and on the cores
the process may run on: 16 workers decoding JPEGs on a 16-core host have no core to spare.

`snapshot()` reads, on Linux, every live child of this process (`/proc/self/task/*/children`)
and its CPU seconds so far (`/proc/<pid>/stat`, user and system time); the step clock takes
one at each edge of a timed phase: about 0.5 ms with 16 children on a 2-core machine, in one
step at each of at most six boundaries, which the phases' median steps do not see.
`delta` turns two into the children's CPU per step. `usable_cores()` is the CPUs the process
may run on (its affinity), capped by a cgroup's CPU quota where one is set. Elsewhere every
figure is None.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

#: clock ticks a second of /proc's CPU times
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def child_pids(proc: str = "/proc/self") -> list[int] | None:
    """The live children of the process behind `proc` (every thread's children: a child is
    listed under the thread that started it); None where /proc cannot tell."""
    try:
        tasks = os.listdir(f"{proc}/task")
    except OSError:
        return None
    pids: set[int] = set()
    seen = False
    for t in tasks:
        try:
            with open(f"{proc}/task/{t}/children") as f:
                text = f.read()
        except OSError:
            continue
        seen = True
        pids.update(int(p) for p in text.split())
    return sorted(pids) if seen else None


def cpu_seconds(pid: int, proc_root: str = "/proc") -> float | None:
    """User + system CPU seconds of process `pid` so far (its threads together); None where
    it is gone or unreadable."""
    try:
        with open(f"{proc_root}/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    # the command name may hold spaces and parentheses: fields start after the last ')'
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14, 15)
    except (IndexError, ValueError):
        return None


def snapshot(proc: str = "/proc/self", proc_root: str = "/proc") -> dict[int, float] | None:
    """{child pid: its CPU seconds so far} for every live child; None where /proc cannot
    tell (not Linux)."""
    pids = child_pids(proc)
    if pids is None:
        return None
    out = {}
    for pid in pids:
        s = cpu_seconds(pid, proc_root)
        if s is not None:
            out[pid] = s
    return out


def delta(
    a: Mapping[int, float] | None, b: Mapping[int, float] | None, steps: int, wall_ms: float
) -> dict[str, float] | None:
    """The children's CPU between snapshots `a` and `b`, `steps` steps and `wall_ms` apart:
    `cpu_ms` per step (each child alive at `b`: its growth since `a`, all of it where it
    started in between), `processes` (alive at `b`), `working` (those of them that used CPU
    in between: a compile's idle pool of helpers is alive but not working) and `busy_cores`
    (their CPU over the wall time: how many cores they kept busy). A child that exited in
    between is not counted. None where either snapshot is missing or nothing elapsed."""
    if a is None or b is None or steps <= 0 or wall_ms <= 0:
        return None
    grown = [max(0.0, s - a.get(pid, 0.0)) for pid, s in b.items()]
    cpu_s = sum(grown)
    return {
        "cpu_ms": round(cpu_s * 1e3 / steps, 4),
        "processes": len(b),
        "working": sum(1 for g in grown if g > 0),
        "busy_cores": round(cpu_s * 1e3 / wall_ms, 3),
    }


def _cgroup_quota(path: str = "/sys/fs/cgroup/cpu.max") -> float | None:
    """CPUs a cgroup (v2) quota allows, None where there is none or it cannot be read."""
    try:
        with open(path) as f:
            quota, period = f.read().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        return None


def usable_cores(quota_path: str = "/sys/fs/cgroup/cpu.max") -> float | None:
    """The CPUs this process may run on: its affinity, capped by a cgroup CPU quota; None
    where neither can be read."""
    try:
        n: float | None = float(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        n = float(os.cpu_count()) if os.cpu_count() else None
    q = _cgroup_quota(quota_path)
    if q is not None:
        n = q if n is None else min(n, q)
    return n
