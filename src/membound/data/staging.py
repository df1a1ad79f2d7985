"""Host-side staging: a pool of reusable pinned buffers and parallel copies into them.

Why a pool: `cudaHostAlloc` costs milliseconds per call and pins pages the OS must find, so
allocating a pinned buffer per batch would cost more than the copy it enables. Buffers are
flat uint8 blocks, viewed as any dtype/shape; each carries the event recorded after the
device copy that read it, and is not handed out again before that event completed.

Why parallel copies: one thread copying 38 MB of pageable memory into pinned memory runs at
memory-copy speed of one core (a few GB/s), slower than PCIe from pinned memory (~55 GB/s on
an H200). Torch's `copy_` releases the GIL, so a few threads each copying a slice of the
tensor multiply the host-side rate.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

#: Buffers are sized in multiples of this, so batches of slightly different size share them.
GRANULE = 64 << 10
#: Below this many bytes a copy runs inline: handing it to a thread costs more than it saves.
INLINE_BYTES = 1 << 20
#: Each thread copies at least this many bytes per task.
MIN_CHUNK_BYTES = 4 << 20


def _round_up(n: int) -> int:
    return max(GRANULE, -(-n // GRANULE) * GRANULE)


@dataclass(eq=False)
class StagingBuffer:
    """One reusable host block; `event` is set once a device copy has read it."""

    data: torch.Tensor  # flat uint8
    event: Any = None
    busy: bool = False
    stamp: int = 0  # release order, to wait on the oldest first

    def view(self, like: torch.Tensor) -> torch.Tensor:
        """A contiguous tensor with `like`'s dtype and shape living in this buffer."""
        nbytes = like.numel() * like.element_size()
        return self.data[:nbytes].view(like.dtype).view(like.shape)


@dataclass(eq=False)
class StagingPool:
    """Reusable host buffers with a bounded total count (memory stays flat across epochs).

    `alloc(nbytes)` returns a flat uint8 host tensor (pinned, for CUDA). The count limit is
    `slots * largest number of buffers one batch needed`: enough for `slots` batches in flight.
    """

    alloc: Callable[[int], torch.Tensor]
    slots: int = 4
    buffers: dict[int, list[StagingBuffer]] = field(default_factory=dict)
    allocations: int = 0  # how many times `alloc` ran (tests check the pool is reused)
    _per_batch: int = 1
    _clock: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def reserve(self, n_buffers: int) -> None:
        """Declare that the next batch needs `n_buffers` at once (raises the count limit)."""
        self._per_batch = max(self._per_batch, n_buffers)

    @property
    def limit(self) -> int:
        return self.slots * self._per_batch

    def count(self) -> int:
        return sum(len(v) for v in self.buffers.values())

    def nbytes(self) -> int:
        return sum(b.data.numel() for v in self.buffers.values() for b in v)

    def acquire(self, nbytes: int) -> StagingBuffer:
        key = _round_up(nbytes)
        with self._lock:
            same = [b for b in self.buffers.get(key, []) if not b.busy]
            ready = [b for b in same if b.event is None or b.event.query()]
            if ready:
                return self._take(ready[0])
            if self.count() < self.limit:
                return self._new(key)
            if same:  # all pending: wait for the oldest device copy to finish reading one
                oldest = min(same, key=lambda b: b.stamp)
                oldest.event.synchronize()
                return self._take(oldest)
            # Full of buffers of other sizes: drop the oldest idle one, allocate this size.
            idle = [b for v in self.buffers.values() for b in v if not b.busy]
            if not idle:
                raise RuntimeError("staging pool exhausted: more buffers busy than its limit")
            victim = min(idle, key=lambda b: b.stamp)
            if victim.event is not None:
                victim.event.synchronize()
            self.buffers[_round_up(victim.data.numel())].remove(victim)
            return self._new(key)

    def release(self, buf: StagingBuffer, event: Any) -> None:
        """Hand a buffer back; it is reusable once `event` (the copy that reads it) completes."""
        with self._lock:
            self._clock += 1
            buf.event, buf.busy, buf.stamp = event, False, self._clock

    def drain(self) -> None:
        """Wait for every pending copy that reads a pooled buffer (before freeing the pool)."""
        with self._lock:
            for v in self.buffers.values():
                for b in v:
                    if b.event is not None:
                        b.event.synchronize()

    def _take(self, buf: StagingBuffer) -> StagingBuffer:
        buf.busy = True
        return buf

    def _new(self, key: int) -> StagingBuffer:
        buf = StagingBuffer(self.alloc(key), busy=True)
        self.allocations += 1
        self.buffers.setdefault(key, []).append(buf)
        return buf


class HostCopier:
    """Copies host tensors into staging views, splitting large ones across a few threads.

    Contiguous tensors are copied as raw bytes with `numpy.copyto`, which releases the GIL
    and runs on exactly one core: N threads use N cores. (Torch's own `copy_` would start an
    OpenMP team per calling thread, oversubscribing the machine; and DataLoader's pinning
    thread sets torch's thread count to 1 process-wide, so we cannot rely on it either.)
    """

    def __init__(self, num_threads: int, name: str = "membound-stage"):
        self.num_threads = max(1, num_threads)
        self._pool = (
            ThreadPoolExecutor(self.num_threads, thread_name_prefix=name)
            if self.num_threads > 1
            else None
        )

    def copy(self, pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """For each (dst, src): dst.copy_(src). dst is contiguous; returns when all landed."""
        tasks: list[tuple[Callable, Any, Any]] = []
        for dst, src in pairs:
            nbytes = src.numel() * src.element_size()
            if nbytes == 0:
                continue
            if not src.is_contiguous() or src.is_conj() or src.is_neg():
                tasks.append((torch.Tensor.copy_, dst, src))
                continue
            d, s = _bytes(dst), _bytes(src)
            pieces = (
                1
                if self._pool is None
                else max(1, min(self.num_threads, nbytes // MIN_CHUNK_BYTES))
            )
            step = -(-nbytes // pieces)
            tasks.extend(
                (np.copyto, d[a : a + step], s[a : a + step]) for a in range(0, nbytes, step)
            )
        if self._pool is None or len(tasks) == 1 or sum(_size(t) for t in tasks) < INLINE_BYTES:
            for fn, dst, src in tasks:
                fn(dst, src)
            return
        futures = [self._pool.submit(fn, dst, src) for fn, dst, src in tasks]
        for f in futures:
            f.result()  # re-raises a failed copy here, in the producer

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def _bytes(t: torch.Tensor) -> np.ndarray:
    """A contiguous tensor's memory as a flat uint8 numpy array (shared, no copy)."""
    return t.detach().reshape(-1).view(torch.uint8).numpy()


def _size(task: tuple) -> int:
    src = task[2]
    return src.nbytes if isinstance(src, (np.ndarray, torch.Tensor)) else 0
