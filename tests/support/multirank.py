"""Synthetic multi-rank kineto traces with planted stragglers and exposed all-reduces.

Times in µs; every number a test asserts is derived in the docstrings here."""

from __future__ import annotations

from pathlib import Path

from support.tracebuilder import TraceBuilder

NCCL_AR = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
COMM_STREAM = 20


class RankTraceBuilder(TraceBuilder):
    def __init__(self, rank: int, world: int, backend: str = "nccl", **kw):
        super().__init__(**kw)
        self.rank, self.world, self.backend = rank, world, backend

    def allreduce(
        self, host_ts: float, gpu_ts: float, dur: float, nelems: int, dtype="Float", seq=None
    ):
        """record_param_comms on the host (sizes), then the NCCL kernel on the comm stream."""
        extra = {} if seq is None else {"Seq": seq}
        self._x(
            "cpu_op",
            "record_param_comms",
            host_ts,
            5.0,
            **{
                "Collective name": "allreduce",
                "dtype": dtype,
                "In msg nelems": nelems,
                "Out msg nelems": nelems,
                "Group size": self.world,
                "Process Group Name": "0",
                "Rank": self.rank,
                **extra,
            },
        )
        self.launch(NCCL_AR, host_ts + 6, gpu_ts, dur, stream=COMM_STREAM)

    def gloo_allreduce(self, ts: float, dur: float, tid: int = 300):
        self.annotation("gloo:all_reduce", ts, dur, tid=tid)

    def document(self) -> dict:
        doc = super().document()
        info = {"backend": self.backend, "rank": self.rank, "world_size": self.world}
        return {"schemaVersion": 1, "distributedInfo": info, **doc}


STEP = 10_000.0
AR_NELEMS = 25_000_000  # fp32: 100 MB


def straggler(rank: int, world: int = 2, late: int = 1, steps: int = 3, sleep=3000.0):
    """Per 10 ms step: a 4 ms compute kernel, then a 100 MB fp32 all-reduce ending at 7.5 ms
    on every rank. The late rank starts computing `sleep` µs later (3.1 ms instead of 0.1),
    so its all-reduce lasts 0.4 ms while the others' last 3.4 ms.
    Expected: straggler = `late`, held back 3.0 ms/step (30% of a step); each other rank
    waits 3.0 ms/step; exposed communication net of waiting 0.4 ms/step on every rank;
    bus bandwidth 100e6 B / 0.4 ms × 2(n−1)/n = 250 GB/s × (2(n-1)/n)."""
    b = RankTraceBuilder(rank, world)
    for s in range(steps):
        o = s * STEP
        b.step(s + 3, o, STEP)
        start = o + 100 + (sleep if rank == late else 0.0)
        b.launch("sm90_gemm_bf16", start - 50, start, 4000.0)
        b.allreduce(start + 3950, start + 4000, o + 7500 - (start + 4000), AR_NELEMS)
    return b


def exposed(rank: int, world: int = 2, steps: int = 3, jitter: float = 0.0):
    """Per 10 ms step: forward kernel 0–1 ms, backward kernel 1–2 ms, a 400 MB all-reduce
    1.5–7.5 ms on the comm stream: 0.5 ms of it overlaps backward, 5.5 ms is exposed.
    `jitter` makes rank 0 start its all-reduce that many µs earlier (noise: it waits longer).
    Expected: exposed 5.5 ms/step; bus bandwidth 400e6 B / 6 ms = 66.7 GB/s (n = 2)."""
    b = RankTraceBuilder(rank, world)
    jitter = jitter if rank == 0 else 0.0
    for s in range(steps):
        o = s * STEP
        b.step(s, o, STEP)
        b.launch("fwd_kernel", o + 10, o + 0, 1000.0)
        b.launch("bwd_kernel", o + 20, o + 1000, 1000.0)
        b.allreduce(o + 30, o + 1500 - jitter, 6000.0 + jitter, 100_000_000)
    return b


def write_ranks(folder: Path, make, world: int = 2, **kw) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return [make(r, world, **kw).write(folder / f"trace.rank{r}.json.gz") for r in range(world)]
