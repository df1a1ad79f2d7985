"""Whether a worker-fed DataLoader has cores to grow into: its workers' CPU against the host's.

A loader whose workers cannot build batches as fast as the GPU takes them (`input-starved`,
`worker_bound`) is usually told to add workers. That helps only where there are cores for them:
16 workers decoding and augmenting JPEGs on a 16-core host already keep every core busy, and a
17th worker only shares them. The capture keeps what decides it (`trace.children`, capture meta
`children_per_step` and `host_cores`): the workers' CPU a step in the unprofiled phase, how many
cores they kept busy, and the cores the process may use; the training process's own CPU a step
is in `process_per_step`.

The batches a step needs cost the workers `cpu_ms` of CPU, however many workers share it. With
every core the training process leaves them, `cores - main_busy`, they could make a step's
batches in no less than `cpu_ms / (cores - main_busy)`: the input's floor
(`input_floor_ms`), optimistic (a core shared by two processes, or memory bandwidth, gives
less). More workers cannot take the step below it; where the step already sits near it, the
cores are the limit and the fix is cheaper items (decoding and augmenting on the GPU, lighter
transforms), not more workers.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

#: the fewest cores taken as left to the workers (a training process that reads as busier
#: than the host's cores still leaves the workers their time slices)
MIN_CORES = 0.5
#: free cores below which the host is said to be saturated (no whole core is idle)
SATURATED_FREE = 1.0


@dataclass(frozen=True)
class LoaderCpu:
    """The workers' and the training process's CPU in one phase, and the host's cores."""

    cores: float  # the CPUs the process may use (affinity, cgroup quota)
    workers_cpu_ms: float  # the workers' CPU a step (all of them together)
    workers_busy: float  # cores the workers kept busy
    workers_working: int  # child processes that used CPU in the phase
    main_busy: float  # cores the training process (all its threads) kept busy

    @property
    def free(self) -> float:
        """Cores neither the workers nor the training process used."""
        return self.cores - self.main_busy - self.workers_busy

    @property
    def saturated(self) -> bool:
        return self.free < SATURATED_FREE

    @property
    def input_floor_ms(self) -> float:
        """The fewest ms in which the workers could make a step's batches on every core the
        training process leaves them."""
        return self.workers_cpu_ms / max(self.cores - self.main_busy, MIN_CORES)

    def evidence(self) -> dict[str, Any]:
        return {
            "host_cores": round(self.cores, 2),
            "workers_cpu_ms_per_step": round(self.workers_cpu_ms, 3),
            "workers_busy_cores": round(self.workers_busy, 2),
            "workers_working": self.workers_working,
            "training_process_busy_cores": round(self.main_busy, 2),
            "cores_free": round(self.free, 2),
            "input_floor_ms": round(self.input_floor_ms, 3),
            "cores_saturated": self.saturated,
        }


def of(meta: Any, phase: str) -> LoaderCpu | None:
    """From a capture meta, the unprofiled `phase` ("unprofiled" or "after"); None where the
    capture did not read the children (before 2026-12-07, or off Linux), the process had no
    working child in that phase, or a figure is missing."""
    if not isinstance(meta, dict):
        return None
    cores = meta.get("host_cores")
    kids = (meta.get("children_per_step") or {}).get(phase)
    proc = (meta.get("process_per_step") or {}).get(phase)
    steps = (meta.get("step_times_ms") or {}).get(phase)
    if not isinstance(cores, int | float) or cores <= 0 or not isinstance(kids, dict):
        return None
    if not isinstance(proc, dict) or not isinstance(steps, list) or not steps:
        return None
    try:
        cpu, busy, working = float(kids["cpu_ms"]), float(kids["busy_cores"]), int(kids["working"])
        main_cpu = float(proc["cpu_ms"])
        mean_step = statistics.fmean(float(s) for s in steps)
    except (KeyError, TypeError, ValueError):
        return None
    if working <= 0 or cpu <= 0 or mean_step <= 0:
        return None
    return LoaderCpu(float(cores), cpu, busy, working, main_cpu / mean_step)


def workers_saving(lc: LoaderCpu, step_ms: float, lost_ms: float) -> float:
    """What more workers can save a step: the loader's wait, down to the input's floor
    (`LoaderCpu.input_floor_ms`): the step cannot fall below the GPU's part of it (`step_ms -
    lost_ms`) nor below the floor."""
    after = max(step_ms - lost_ms, min(step_ms, lc.input_floor_ms))
    return max(0.0, min(lost_ms, step_ms - after))
