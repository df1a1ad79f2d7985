"""The GPU<->GPU ceiling: peer copy bandwidth (device 0 -> 1) and NCCL all-reduce bus bandwidth.

Only on a machine with two or more GPUs. The all-reduce runs in freshly spawned processes
(one per GPU, a NCCL process group), because NCCL in the measuring process itself would tie
it to a group. NVLink multicast (NVLS) is switched off before any NCCL initialisation: the
shared multi-GPU machines require it, and a measurement with it off is what user jobs there
can reach.

Bus bandwidth is nccl-tests' definition: algorithm bandwidth (bytes / time) times
2(n-1)/n for all-reduce, so it is comparable across group sizes and to the link rate.

NCCL's bus bandwidth grows with the message size (latency and protocol choice dominate small
messages), so one figure cannot be the ceiling of every collective: the first 2xH200 run
measured 234 GB/s with a 32 MiB all-reduce, and DDP's 64 MiB buckets then reached 256 GB/s,
"1.09 of the ceiling". The all-reduce is therefore measured at a sweep of sizes
(`SWEEP_BYTES`, `QUICK_SWEEP_BYTES`: one process group, one NCCL start-up for all of them)
and stored per size (`allreduce_bus_bandwidth_by_size`); `allreduce_ceiling(nbytes)` gives a
collective the figure measured at the smallest size at or above its own, so it is compared
with what the link reaches with a message at least as large. A collective larger than every
measured size gets the largest size's figure (flagged: its fraction may exceed 1).

The figures are two steps of `membound roofline` (`register`, called by `device.measure`)
and go into `Ceilings.interconnect`, cached with the other ceilings; `device.lookup.
interconnect_for` finds them for an analysis.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import socket
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from membound._env import nccl_safe_env

#: all-reduce message sizes (bytes) of the full and the quick measurement; 64 MiB is about a
#: DDP bucket in the first buckets' size class (bucket_cap_mb=25 gives ~26 MB buckets)
SWEEP_BYTES = (4 << 20, 16 << 20, 64 << 20, 256 << 20)
QUICK_SWEEP_BYTES = (16 << 20, 64 << 20)


@dataclass
class Interconnect:
    name: str  # GPU name
    gpus: int
    peer_copy_bandwidth: float | None = None  # bytes/s, cuda:0 -> cuda:1, one direction
    peer_access: bool | None = None  # torch.cuda.can_device_access_peer(0, 1)
    allreduce_bus_bandwidth: float | None = None  # bytes/s, nccl-tests busBW (largest size)
    allreduce_bytes: int | None = None  # the message size of `allreduce_bus_bandwidth`
    allreduce_ranks: int | None = None
    measured_at: str | None = None
    notes: list[str] = field(default_factory=list)
    #: {message bytes (as a string: JSON keys): bus bandwidth bytes/s} of the size sweep
    allreduce_bus_bandwidth_by_size: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Interconnect:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def allreduce_sizes(self) -> list[tuple[int, float]]:
        """[(message bytes, bus bandwidth bytes/s)] by size: the sweep, else the one figure
        of files written before the sweep existed."""
        out: dict[int, float] = {}
        for k, v in (self.allreduce_bus_bandwidth_by_size or {}).items():
            try:
                size, bw = int(k), float(v)
            except (TypeError, ValueError):
                continue
            if size > 0 and bw > 0:
                out[size] = bw
        if not out and self.allreduce_bus_bandwidth:
            out[int(self.allreduce_bytes or 0)] = float(self.allreduce_bus_bandwidth)
        return sorted(out.items())

    def allreduce_ceiling(self, nbytes: float | None) -> tuple[float | None, int | None]:
        """(bus bandwidth bytes/s, message bytes it was measured at) to compare a collective
        of `nbytes` with: the smallest measured size at or above `nbytes`, else the largest
        measured size (the collective is larger than the sweep: its fraction may exceed 1).
        Unknown `nbytes`: the largest size's figure."""
        sizes = self.allreduce_sizes()
        if not sizes:
            return None, None
        if nbytes:
            for size, bw in sizes:
                if size >= nbytes:
                    return bw, size or None
        size, bw = sizes[-1]
        return bw, size or None


def bus_factor(collective: str, n: int) -> float:
    """busBW / algBW for a collective on n ranks (nccl-tests' PERFORMANCE.md)."""
    if n <= 1:
        return 1.0
    if collective == "allreduce":
        return 2 * (n - 1) / n
    if collective in ("allgather", "reducescatter", "alltoall"):
        return (n - 1) / n
    return 1.0  # broadcast, reduce, send/recv


# --------------------------------------------------------------------------- measuring
def peer_copy(nbytes: int = 256 << 20, reps: int = 10, samples: int = 5) -> tuple[float, bool]:
    """Bytes/s of `dst.copy_(src)` from cuda:0 to cuda:1 (median of `samples` timings of
    `reps` copies), and whether peer access is enabled between them."""
    import torch

    if torch.cuda.device_count() < 2:
        raise RuntimeError("peer copy needs two GPUs")
    src = torch.rand(nbytes // 4, device="cuda:0")
    dst = torch.empty(nbytes // 4, device="cuda:1")
    dst.copy_(src)  # warm-up: peer mapping, first-touch

    def sync() -> None:
        torch.cuda.synchronize(0)
        torch.cuda.synchronize(1)

    times = []
    for _ in range(samples):
        sync()
        t0 = time.perf_counter()
        for _ in range(reps):
            dst.copy_(src)
        sync()
        times.append((time.perf_counter() - t0) / reps)
    times.sort()
    return nbytes / times[len(times) // 2], bool(torch.cuda.can_device_access_peer(0, 1))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _allreduce_worker(
    rank: int, world: int, port: int, sizes: list[int], iters: int, out: str, backend: str
):
    nccl_safe_env()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch
    import torch.distributed as dist

    cuda = backend == "nccl"
    if cuda:
        torch.cuda.set_device(rank)
    device = "cuda" if cuda else "cpu"
    dist.init_process_group(backend, rank=rank, world_size=world)
    try:
        results = {}
        for nbytes in sizes:  # one group for the whole sweep: NCCL starts up once
            x = torch.ones(nbytes // 2, dtype=torch.bfloat16, device=device)
            for _ in range(3 if cuda else 1):
                dist.all_reduce(x)
            if cuda:
                torch.cuda.synchronize()
            dist.barrier()
            t0 = time.perf_counter()
            if cuda:
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
            for _ in range(iters):
                dist.all_reduce(x)
            if cuda:
                end.record()
                torch.cuda.synchronize()
                ms = start.elapsed_time(end) / iters
            else:  # gloo: only for testing the machinery on CPU
                ms = (time.perf_counter() - t0) * 1e3 / iters
            del x
            t = torch.tensor([ms], dtype=torch.float64, device=device)
            # the slowest rank's time is the collective's
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            results[str(nbytes)] = float(t.item())
        if rank == 0:
            Path(out).write_text(json.dumps({"ms": results}))
    finally:
        dist.destroy_process_group()


def allreduce_sweep(
    world: int | None = None,
    sizes: tuple[int, ...] = SWEEP_BYTES,
    iters: int = 20,
    backend: str = "nccl",
) -> dict[int, float]:
    """{message bytes: nccl-tests busBW (bytes/s)} of bf16 all-reduces of each size over
    `world` GPUs, measured in one group of freshly spawned processes (`backend="gloo"` runs
    it on CPU, for tests)."""
    import torch.multiprocessing as mp

    if world is None:
        import torch

        world = torch.cuda.device_count()
    if world < 2:
        raise RuntimeError("an all-reduce measurement needs two GPUs")
    sizes = tuple(sorted({int(s) for s in sizes}))
    if not sizes or sizes[0] < 4:
        raise ValueError(f"all-reduce sizes must be at least 4 bytes, got {sizes}")
    nccl_safe_env()  # inherited by the spawned workers
    with tempfile.TemporaryDirectory(prefix="membound-ar-") as tmp:
        out = os.path.join(tmp, "result.json")
        mp.spawn(
            _allreduce_worker,
            args=(world, _free_port(), list(sizes), iters, out, backend),
            nprocs=world,
        )
        ms = json.loads(Path(out).read_text())["ms"]
    factor = bus_factor("allreduce", world)
    return {int(k): int(k) / (v / 1e3) * factor for k, v in ms.items()}


def allreduce_bus_bandwidth(
    world: int | None = None, nbytes: int = 256 << 20, iters: int = 20, backend: str = "nccl"
) -> float:
    """nccl-tests busBW (bytes/s) of a bf16 all-reduce of `nbytes` over `world` GPUs."""
    return allreduce_sweep(world, (nbytes,), iters, backend)[nbytes]


def _set_sweep(ic: Interconnect, sweep: dict[int, float], ranks: int) -> None:
    """Store a sweep: per size, and its largest size as the headline figure."""
    largest = max(sweep)
    ic.allreduce_bus_bandwidth_by_size = {str(k): v for k, v in sorted(sweep.items())}
    ic.allreduce_bus_bandwidth, ic.allreduce_bytes = sweep[largest], largest
    ic.allreduce_ranks = ranks


# ------------------------------------------------------------- roofline measurement steps
def register(step, skip_exc) -> None:
    """Register the two GPU<->GPU steps with `membound.device.measure` (called from there)."""

    def needs_two():
        import torch

        n = torch.cuda.device_count()
        if n < 2:
            raise skip_exc(f"GPU<->GPU ceilings need two GPUs (this machine has {n})")
        return n

    def _store(c, **figures) -> None:
        import torch

        base = c.interconnect or Interconnect(name=c.name, gpus=torch.cuda.device_count()).to_dict()
        at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        c.interconnect = {**base, **figures, "measured_at": at}

    def p2p(c, plan) -> None:
        needs_two()
        bw, access = peer_copy(min(plan.mem_bytes, 256 << 20))
        _store(c, peer_copy_bandwidth=bw, peer_access=access)

    def allreduce(c, plan) -> None:
        n = needs_two()
        quick = plan.rep_ms < 50
        sizes = tuple(
            s for s in (QUICK_SWEEP_BYTES if quick else SWEEP_BYTES) if s <= plan.mem_bytes
        )
        sweep = allreduce_sweep(n, sizes or (min(plan.mem_bytes, 64 << 20),), 10 if quick else 20)
        ic = Interconnect(name=c.name, gpus=n)
        _set_sweep(ic, sweep, n)
        _store(
            c,
            allreduce_bus_bandwidth=ic.allreduce_bus_bandwidth,
            allreduce_bytes=ic.allreduce_bytes,
            allreduce_ranks=n,
            allreduce_bus_bandwidth_by_size=ic.allreduce_bus_bandwidth_by_size,
        )

    step("cuda", "p2p", "GPU<->GPU peer copy (cuda:0 -> cuda:1)")(p2p)
    step("cuda", "allreduce", "GPU<->GPU all-reduce bus bandwidth (NCCL, NVLS off)")(allreduce)
