"""Host<->device copies: bandwidth, and how long the host call was blocked.

The fact this makes visible: `non_blocking=True` is only asynchronous when the host buffer is
page-locked. From pageable memory the driver stages the data through a pinned bounce buffer
synchronously, so the host is blocked for (nearly) the whole copy anyway.

Per repetition: synchronize, record a start event, call `copy_` (host clock around just that
call), record an end event, synchronize. The copy's duration is the event pair (what the GPU
stream saw, from the moment the copy could start to its end); the host-blocked fraction is
the host time inside `copy_` divided by that duration, clipped to [0, 1].
"""

from __future__ import annotations

import statistics
import time

from membound.device.ceilings import Transfer
from membound.device.timing import Timed

#: (direction, host memory, non_blocking) in the order they are measured and shown.
CONFIGS = tuple(
    (direction, memory, nb)
    for direction in ("h2d", "d2h")
    for memory in ("pageable", "pinned")
    for nb in (False, True)
)


class HostBuffers:
    """One pageable and one pinned host buffer plus a device buffer, allocated once."""

    def __init__(self, nbytes: int, device: str = "cuda"):
        import torch

        self.nbytes = nbytes
        # pre-touch pageable memory so page faults are not billed to the first copy
        self.pageable = torch.ones(nbytes, dtype=torch.uint8)
        self.pinned = torch.ones(nbytes, dtype=torch.uint8).pin_memory()
        self.device = torch.ones(nbytes, dtype=torch.uint8, device=device)

    def host(self, memory: str):
        return self.pinned if memory == "pinned" else self.pageable


def measure_transfer(
    buffers: HostBuffers, direction: str, memory: str, non_blocking: bool, reps: int = 5
) -> Transfer:
    import torch

    host = buffers.host(memory)
    src, dst = (host, buffers.device) if direction == "h2d" else (buffers.device, host)
    durations, blocked = [], []
    for i in range(reps + 1):  # the first run is a warm-up
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t0 = time.perf_counter()
        dst.copy_(src, non_blocking=non_blocking)
        t1 = time.perf_counter()
        end.record()
        torch.cuda.synchronize()
        if i == 0:
            continue
        seconds = start.elapsed_time(end) / 1e3
        durations.append(seconds)
        blocked.append(min(1.0, (t1 - t0) / seconds) if seconds > 0 else 1.0)
    seconds = statistics.median(durations)
    spread = Timed.of([d * 1e3 for d in durations])
    return Transfer(
        direction=direction,
        memory=memory,
        non_blocking=non_blocking,
        bytes=buffers.nbytes,
        bandwidth=buffers.nbytes / seconds,
        host_blocked_fraction=statistics.median(blocked),
        bandwidth_spread=list(spread.rates(buffers.nbytes)[1:]),
    )
