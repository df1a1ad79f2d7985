"""What actually happened, as typed tables: the `Trace` every reader produces and every
analysis reads.

A reader (`trace.load`'s registry: kineto JSON today) fills the columns below from its own
format and turns its naming conventions into typed columns at load time (`GPU.direction`,
`GPU.host_memory`, `GPU.collective`, `RUNTIME.call`, `CPU.role`, `CPU.step`), so no analysis
tests an event's name to know what it is. Names stay interned (`Trace.names`) for display.
Times are microseconds on the trace's clock, float64.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: `gpu.kind`: GPU activity kinds
KERNEL, MEMCPY, MEMSET = 0, 1, 2
#: `cpu.kind`: host event kinds
CPU_OP, USER_ANNOTATION, PYTHON = 0, 1, 2

#: `gpu.direction` of a memcpy (0 for everything else)
NO_COPY, H2D, D2H, D2D, OTHER_COPY = 0, 1, 2, 3, 4
#: `gpu.host_memory` of a host<->device memcpy: the host side's memory (0: none/unknown)
NO_HOST, PAGEABLE, PINNED = 0, 1, 2

#: `runtime.call`: what a CUDA runtime/driver call does
OTHER_CALL, LAUNCH, SYNC, MEMCPY_CALL = 0, 1, 2, 3
#: `runtime.call` of a CUDA graph launch (cudaGraphLaunch): one call, every kernel of the
#: replay carries its correlation id; a kind of launch (`LAUNCH_CALLS`)
GRAPH_LAUNCH = 4
LAUNCH_CALLS = (LAUNCH, GRAPH_LAUNCH)

#: `cpu.role`: what a host event is, where it matters to the analysis
NO_ROLE = 0
STEP = 1  # a step mark (`cpu.step` holds its number)
DATALOADER = 2  # a DataLoader's `__next__` (single-process loader)
DATALOADER_WORKERS = 3  # a DataLoader's `__next__` with worker processes
SYNC_OP = 4  # an op that synchronises the host with the GPU (`.item()`)
COPY_OP = 5  # an op that copies a tensor (to / _to_copy / copy_)
HOST_COLLECTIVE = 6  # a collective run by the host (gloo)
DATALOADER_ROLES = (DATALOADER, DATALOADER_WORKERS)

#: `gpu.collective` - 1 indexes this (0: not a collective)
COLLECTIVE_KINDS = (
    "allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce", "sendrecv",
    "send", "recv", "barrier", "gather", "scatter", "other",
)  # fmt: skip


#: `Trace.dropped` keys: why a reader left an event out
DROP_REASONS = {
    "bad_ts": "without a usable ts (missing, null, NaN or not a number)",
    "bad_dur": "without a usable dur (missing, null, NaN or not a number)",
    "negative_dur": "with a negative dur",
    "huge_dur": "with a dur over 1e11 µs",
}


def describe_dropped(dropped: dict[str, int]) -> str:
    """'12 events dropped: 10 without a usable ts (...), 2 with a negative dur'; '' if none."""
    total = sum(dropped.values())
    if not total:
        return ""
    parts = [f"{n} {DROP_REASONS.get(reason, reason)}" for reason, n in dropped.items() if n]
    return f"{total} event{'s' if total != 1 else ''} dropped: " + ", ".join(parts)


@dataclass
class Table:
    """Named NumPy columns of equal length."""

    cols: dict[str, np.ndarray]

    def __getattr__(self, name: str) -> np.ndarray:
        try:
            return self.__dict__["cols"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __len__(self) -> int:
        return len(next(iter(self.cols.values()))) if self.cols else 0


@dataclass
class Trace:
    """What actually happened, as typed tables.

    - `cpu`: host ops and annotations: ts, dur (µs), name, tid, kind, ext_id, shape (index
      into `shapes`, -1 when the op recorded none or malformed ones), strides (index into
      `strides`, -1 when none), seq (the autograd "Sequence number": a forward op and the
      backward node it recorded share it; -1 when none), role (`NO_ROLE`, `STEP`, ...), step (the
      number of a step mark, else -1), collective (as `gpu.collective`, for host
      collectives).
    - `runtime`: CUDA runtime/driver calls: ts, dur, name, tid, correlation, call (`LAUNCH`,
      `SYNC`, `MEMCPY_CALL`, `OTHER_CALL`).
    - `gpu`: kernels, memcpys, memsets: ts, dur, name, kind, stream, device, correlation,
      bytes (-1 when unknown), blocks (a kernel's thread blocks, its launch grid's x·y·z; -1
      when not recorded; absent from tables a reader built without it), direction (`H2D`, ...), host_memory (`PAGEABLE`, `PINNED`),
      collective (1 + index into `COLLECTIVE_KINDS`, 0 when not a collective).
    - `names`: interned event names; `shapes`: interned (Input Dims, Input type, Concrete
      Inputs) of ops that recorded shapes; `strides`: interned Input Strides (one list per
      input, as Input Dims), apart from `shapes` so its tuples keep their three parts.
    - `dropped`: events left out because their times cannot be used, by reason (keys of
      `DROP_REASONS`; empty when none); `describe_dropped` says it in words.
    """

    path: str
    names: list[str]
    cpu: Table
    runtime: Table
    gpu: Table
    shapes: list[tuple[Any, Any, Any]]
    device_properties: list[dict] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    strides: list[list] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def device_name(self) -> str | None:
        for props in self.device_properties:
            if isinstance(props, dict) and props.get("name"):
                return str(props["name"])
        return None

    @property
    def has_gpu(self) -> bool:
        return len(self.gpu) > 0

    @property
    def main_device(self) -> int:
        """The GPU most of the trace's GPU activity ran on (a rank's own device)."""
        if not len(self.gpu):
            return 0
        values, counts = np.unique(self.gpu.device, return_counts=True)
        return int(values[np.argmax(counts)])

    def name_ids(self, predicate) -> np.ndarray:
        """Ids of interned names for which `predicate(name)` holds."""
        return np.array([i for i, n in enumerate(self.names) if predicate(n)], dtype=np.int32)
