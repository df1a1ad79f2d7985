"""Where staged batches go: the device-specific half of the prefetcher.

The prefetcher's threading, ordering, pooling and shutdown logic is the same for every
device; only these few operations differ. `CudaBackend` is the real one. `HostBackend` runs
the same machinery with plain host memory and no streams, so tests exercise it without a GPU
(and can subclass it to inject delays, failures or pending copies).
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch


class CudaBackend:
    """Pinned staging, one dedicated copy stream for the prefetcher's whole life, events."""

    pins = True

    def __init__(self, device: torch.device):
        self.device = device
        # One stream for the whole life of the prefetcher: creating one per epoch is a known
        # leak (streams are never destroyed by the caching allocator).
        self.stream = torch.cuda.Stream(device=device)

    def needs_staging(self, t: torch.Tensor) -> bool:
        return t.device.type == "cpu" and not t.is_pinned()

    def alloc_host(self, nbytes: int) -> torch.Tensor:
        return torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)

    def new_event(self) -> Any:
        return torch.cuda.Event()

    def thread_setup(self) -> None:
        torch.cuda.set_device(self.device)

    def copy_context(self) -> contextlib.AbstractContextManager:
        return torch.cuda.stream(self.stream)

    def to_device(self, t: torch.Tensor) -> torch.Tensor:
        return t.to(self.device, non_blocking=True)

    def record(self, event: Any) -> None:
        event.record(self.stream)

    def consumer_wait(self, event: Any) -> None:
        torch.cuda.current_stream(self.device).wait_event(event)

    def hand_over(self, t: torch.Tensor) -> None:
        # The tensor was allocated on the copy stream; without this the caching allocator
        # could give its memory to the next copy while the consumer's kernels still read it.
        if t.device.type == "cuda":
            t.record_stream(torch.cuda.current_stream(self.device))


class _DoneEvent:
    """A host 'event' that completes when recorded (host copies are synchronous)."""

    def __init__(self) -> None:
        self.recorded = False

    def record(self) -> None:
        self.recorded = True

    def query(self) -> bool:
        return self.recorded

    def synchronize(self) -> None:
        pass


class HostBackend:
    """The prefetcher's machinery on the CPU: 'device' copies are host clones. `pins=True`
    makes it say it pins, as CudaBackend does (what the prefetcher's choices about a worker
    DataLoader read: `prefetch._works_ahead`, `_loader_pins`)."""

    def __init__(self, device: torch.device | None = None, *, pins: bool = False):
        self.device = device or torch.device("cpu")
        self.pins = pins

    def needs_staging(self, t: torch.Tensor) -> bool:
        return t.device.type == "cpu"

    def alloc_host(self, nbytes: int) -> torch.Tensor:
        return torch.empty(nbytes, dtype=torch.uint8)

    def new_event(self) -> Any:
        return _DoneEvent()

    def thread_setup(self) -> None:
        pass

    def copy_context(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def to_device(self, t: torch.Tensor) -> torch.Tensor:
        return t.to(self.device, copy=True)

    def record(self, event: Any) -> None:
        event.record()

    def consumer_wait(self, event: Any) -> None:
        assert event.query(), "consumer reached a batch whose copy was never recorded"

    def hand_over(self, t: torch.Tensor) -> None:
        pass
