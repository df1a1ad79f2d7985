"""A side-stream prefetcher: batches arrive on the GPU before the training step asks for them.

    for images, labels in membound.data.prefetch(loader, "cuda", transform=Normalize(m, s)):
        loss = model(images) ...

For a loader that does not work ahead on its own, one background thread per epoch pulls
batches from it, copies pageable tensors into reusable pinned buffers (several threads, see
`staging.py`), and issues their host→device copies on a copy stream owned by the prefetcher
for its whole life, followed there by `transform` (so the training thread only waits and
launches). Each batch carries an event recorded after its copies; the consumer's stream
waits on it, so no kernel reads a batch before it landed, and each pinned buffer is reused
only after the event of the copy that read it completed. Up to `depth` batches wait ready in
a queue while one is consumed.

A `DataLoader` with worker processes loads ahead of the loop on its own and pins its batches
itself, on its own pin-memory thread (the prefetcher turns that switch on for its own
iterations: `_loader_pins`), so the prefetcher only copies. It needs no thread of its own
for that: by default (`producer="auto"`) the training thread takes each pinned batch from
such a loader and issues the copies of the next `depth` batches on the copy stream before it
gets the current one; `producer="thread"` keeps the background thread for every loader,
`"inline"` uses none for any.

On CPU (device "cpu", or no CUDA) batches pass through, with `transform` applied.
"""

from __future__ import annotations

import os
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils.data

from membound.data.backend import CudaBackend
from membound.data.staging import HostCopier, StagingPool
from membound.data.tree import flatten, is_movable, tree_map
from membound.errors import BadInput

#: How often a blocked producer checks whether the consumer has gone away (seconds).
_POLL_S = 0.05

#: Who pulls batches from the loader and issues their copies (`Prefetcher(producer=...)`):
#: "thread", a background thread; "inline", the consumer's own thread, `depth` batches ahead;
#: "auto" (the default), inline for a DataLoader whose worker processes and pin thread work
#: ahead already (`_works_ahead`), a thread for everything else. Timed on the H100
#: (2026-12-06, `benchmarks/gpu/session_dec10a.sh`, five calls of Lightning, DeepLabV3 and a
#: timm ViT behind worker loaders): inline saved 8.0-12.9 ms a step, the thread 8.6-11.6 and
#: `pin_memory=True` 8.4-12.0; inline was level on Lightning (0.3 and 0.9 ms short of
#: `pin_memory`) and 0.9-1.6 ms ahead of it on the other two. docs/remedies.md has the figures.
PRODUCERS = ("thread", "inline", "auto")


@dataclass(eq=False)
class _Slot:
    """A batch whose copies are issued: device leaves, the event they complete on, a rebuilder."""

    leaves: list[Any]
    rebuild: Callable[[list[Any]], Any]
    event: Any
    # the source tensors the device copies read directly (pinned already, not staged), kept
    # alive until the batch is delivered; staged sources are not kept: their host copy is done
    sources: list[Any]
    finished: bool = False  # transform/memory_format already applied on the copy stream


@dataclass(eq=False)
class _Failure:
    exc: BaseException


_END = object()


class Prefetcher:
    """Iterable over `loader`'s batches, already on `device`; see the module docstring.

    `backend` replaces the device-specific operations (tests pass `HostBackend()` to run
    the threaded machinery on the CPU). `num_threads` host threads copy pageable tensors
    into pinned buffers.
    """

    def __init__(
        self,
        loader: Iterable,
        device: str | torch.device = "cuda",
        *,
        depth: int = 2,
        transform: Callable[[Any], Any] | None = None,
        memory_format: torch.memory_format | None = None,
        num_threads: int | None = None,
        producer: str = "auto",
        backend: Any = None,
    ):
        if not isinstance(depth, int) or depth < 1:
            raise BadInput(f"prefetch depth must be an integer >= 1, got {depth!r}.")
        if producer not in PRODUCERS:
            raise BadInput(
                f"prefetch producer must be one of {', '.join(PRODUCERS)}, got {producer!r}."
            )
        if transform is not None and not callable(transform):
            raise BadInput(f"prefetch transform must be callable, got {type(transform).__name__}.")
        self.loader = loader
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None and backend is None:
            if torch.cuda.is_available():
                self.device = torch.device("cuda", torch.cuda.current_device())
        self.depth = depth
        self.transform = transform
        self.memory_format = memory_format
        self.num_threads = num_threads or min(8, max(2, (os.cpu_count() or 2) // 2))
        self._backend = backend
        self.producer = producer
        self._pool: StagingPool | None = None
        #: whether the last iteration had the loader pin its own batches (`_loader_pins`)
        self.loader_pinned = False
        #: who produced the last iteration's batches: "thread" or "inline" (None: not yet,
        #: or batches passed through)
        self.produced_by: str | None = None

    # -- what a DataLoader exposes, passed through ------------------------------------
    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    @property
    def sampler(self) -> Any:
        return self.loader.sampler  # type: ignore[attr-defined]

    @property
    def dataset(self) -> Any:
        return self.loader.dataset  # type: ignore[attr-defined]

    @property
    def pipelined(self) -> bool:
        """True when batches go through staging and a copy stream (else: pass-through)."""
        if self._backend is not None:
            return True
        return self.device.type == "cuda" and torch.cuda.is_available()

    @property
    def pool(self) -> StagingPool:
        """The staging buffers (created on first use; kept across epochs)."""
        if self._pool is None:
            self._pool = StagingPool(self._get_backend().alloc_host, slots=self.depth + 2)
        return self._pool

    def __iter__(self) -> Iterator[Any]:
        if not self.pipelined:
            return self._passthrough()
        inline = self.producer == "inline" or (
            self.producer == "auto" and _works_ahead(self.loader, self._get_backend())
        )
        return self._inline() if inline else self._pipelined()

    # -- pass-through (CPU) ----------------------------------------------------------
    def _passthrough(self) -> Iterator[Any]:
        moves = self.device.type not in ("cpu", "cuda")  # e.g. mps: plain synchronous moves
        for batch in self.loader:
            if moves:
                batch = tree_map(lambda x: x.to(self.device), batch)
            yield self._finish(batch)

    def _finish(self, batch: Any) -> Any:
        if self.transform is not None:
            batch = self.transform(batch)
        if self.memory_format is not None:
            fmt = self.memory_format
            batch = tree_map(
                lambda x: (
                    x.contiguous(memory_format=fmt)
                    if isinstance(x, torch.Tensor) and x.dim() == 4
                    else x
                ),
                batch,
            )
        return batch

    # -- pipelined -------------------------------------------------------------------
    def _get_backend(self) -> Any:
        if self._backend is None:
            self._backend = CudaBackend(self.device)
        return self._backend

    def _pipelined(self) -> Iterator[Any]:
        backend = self._get_backend()
        pool = self.pool
        self.produced_by = "thread"
        ready: queue.Queue = queue.Queue(maxsize=self.depth)
        stop = threading.Event()
        copier = HostCopier(self.num_threads)
        # The loader runs on the producer thread; give it the consumer's intra-op thread
        # count, read here on the consumer's thread (see `_match_intra_op_threads`).
        threads = torch.get_num_threads()
        producer = threading.Thread(
            target=self._produce,
            args=(backend, pool, copier, ready, stop, threads),
            name="membound-prefetch",
            daemon=True,  # never keeps the interpreter alive; we still join it below
        )
        producer.start()
        try:
            while True:
                item = ready.get()
                if item is _END:
                    return
                if isinstance(item, _Failure):
                    raise item.exc
                yield self._deliver(backend, item)
                del item  # drop our reference before blocking on the next batch
        finally:
            # Early break, exception or normal end: stop the producer and join everything.
            stop.set()
            while producer.is_alive():
                try:
                    ready.get_nowait()
                except queue.Empty:
                    pass
                producer.join(_POLL_S)
            copier.close()

    def _inline(self) -> Iterator[Any]:
        """The pipeline on the consumer's own thread: before each batch is handed over, the
        copies of the next `depth` batches are issued on the copy stream.

        Why: a DataLoader with worker processes and a pin thread already loads and pins
        ahead of the training loop, off its thread; a producer thread adds only a second
        Python thread beside the training thread, and its copies then come from another
        thread. Here `next()` on the loader takes a pinned batch from the pin thread's
        queue, where the loop alone would have taken it, and the copies are queued `depth`
        batches ahead on the side stream. A loader error is raised at the batch it replaced.
        """
        backend = self._get_backend()
        pool = self.pool
        copier = HostCopier(self.num_threads)
        self.produced_by = "inline"
        it: Iterator[Any] | None = self._iter_loader(backend)
        ahead: deque = deque()
        try:
            while True:
                while it is not None and len(ahead) < self.depth + 1:
                    try:
                        batch = next(it)
                    except StopIteration:
                        it = None
                        break
                    except Exception as exc:  # raised at its batch, after those before it
                        ahead.append(_Failure(exc))
                        it = None
                        break
                    ahead.append(self._stage(backend, pool, copier, batch))
                    del batch
                if not ahead:
                    return
                item = ahead.popleft()
                if isinstance(item, _Failure):
                    raise item.exc
                yield self._deliver(backend, item)
                del item
        finally:
            ahead.clear()
            copier.close()
            del it  # a DataLoader iterator shuts its workers down when dropped

    def _produce(self, backend, pool, copier, ready, stop, threads: int) -> None:
        it = None
        try:
            _match_intra_op_threads(threads)
            backend.thread_setup()
            it = self._iter_loader(backend)
            while not stop.is_set():
                try:
                    batch = next(it)
                except StopIteration:
                    break
                slot = self._stage(backend, pool, copier, batch)
                del batch
                if not _put(ready, slot, stop):
                    return
            _put(ready, _END, stop)
        except BaseException as exc:  # delivered to the consumer after the batches before it
            _put(ready, _Failure(exc), stop)
        finally:
            del it  # a DataLoader iterator shuts its workers down when dropped

    def _iter_loader(self, backend) -> Iterator[Any]:
        """`iter(self.loader)`; a worker-process DataLoader that does not pin is told to.

        Why: on the H200 (timm ViT-B/16, 8 workers, 38.5 MB fp32 batches, 2026-12-05, two
        rounds each against paired baselines) the loader pinning on its own thread with this
        prefetcher copying on the side stream saved 19.5 and 19.6 ms/step; this prefetcher
        staging the pageable batches itself saved 1.5 and 13.3; `pin_memory=True` alone 10.1
        and 21.9. The loader's pin thread takes each batch off the worker queue, pins it and
        drops the worker's shared-memory block there, all off the path of this producer thread.
        The switch is set only while the iterator is made and then restored: the user's
        loader object is left as it was (an iterator reads it once, when it starts).
        """
        loader = self.loader
        self.loader_pinned = _loader_pins(loader, backend)
        if not self.loader_pinned:
            return iter(loader)
        loader.pin_memory = True  # type: ignore[attr-defined]
        try:
            return iter(loader)
        finally:
            loader.pin_memory = False  # type: ignore[attr-defined]

    def _stage(self, backend, pool, copier, batch: Any) -> _Slot:
        leaves, rebuild = flatten(batch)
        staged = list(leaves)
        pairs, bufs = [], []
        pool.reserve(sum(isinstance(x, torch.Tensor) for x in leaves))
        try:
            for i, leaf in enumerate(leaves):
                if isinstance(leaf, torch.Tensor):
                    if leaf.numel() and backend.needs_staging(leaf):
                        buf = pool.acquire(leaf.numel() * leaf.element_size())
                        bufs.append(buf)
                        staged[i] = buf.view(leaf)
                        pairs.append((staged[i], leaf))
                elif backend.pins and callable(getattr(leaf, "pin_memory", None)):
                    staged[i] = leaf.pin_memory()
            copier.copy(pairs)
            finished = False
            with backend.copy_context():
                out = [backend.to_device(x) if isinstance(x, torch.Tensor) else x for x in staged]
                if not any(is_movable(x) for x in out):
                    # The transform (e.g. uint8 -> normalized bf16) runs here, on the copy
                    # stream, before the batch's event: the training thread then only waits and
                    # launches its own kernels (under a profiler, per-batch work on that thread
                    # showed up as launch gaps).
                    out, rebuild = flatten(self._finish(rebuild(out)))
                    finished = True
                event = backend.new_event()
                backend.record(event)
        except BaseException:
            # Some copies may already be queued: buffers are free only after they finish.
            try:
                event = backend.new_event()
                backend.record(event)
            except Exception:
                event = None
            for buf in bufs:
                pool.release(buf, event)
            raise
        for buf in bufs:
            pool.release(buf, event)
        # Staged sources are dropped here, on the producer thread: a worker's batch lives in
        # shared memory, and whoever drops it last unmaps it. Kept in the slot, it was freed
        # on the training thread when the next batch was asked for.
        direct = [
            x
            for x, st in zip(leaves, staged, strict=True)
            if x is st and isinstance(x, torch.Tensor)
        ]
        return _Slot(out, rebuild, event, direct, finished)

    def _deliver(self, backend, slot: _Slot) -> Any:
        backend.consumer_wait(slot.event)
        leaves = []
        for leaf in slot.leaves:
            if isinstance(leaf, torch.Tensor):
                backend.hand_over(leaf)
            elif is_movable(leaf):
                # Opaque objects: pinned ahead by the producer, but their tensors are hidden
                # from us (no record_stream possible), so they are copied here, on the
                # consumer's stream — still asynchronous for the host.
                leaf = leaf.to(backend.device, non_blocking=True)
            leaves.append(leaf)
        batch = slot.rebuild(leaves)
        return batch if slot.finished else self._finish(batch)


def _works_ahead(loader: Any, backend: Any) -> bool:
    """True when `loader` loads and pins ahead of its consumer on its own: a torch
    `DataLoader` with worker processes feeding a backend that pins (CUDA), whose pin thread
    this prefetcher turns on where it is off (`_loader_pins`). Such a loader gets the
    inline producer under `producer="auto"`."""
    return (
        bool(getattr(backend, "pins", False))
        and isinstance(loader, torch.utils.data.DataLoader)
        and loader.num_workers > 0
    )


def _loader_pins(loader: Any, backend: Any) -> bool:
    """True when `loader` should pin its own batches: one that works ahead on its own
    (`_works_ahead`) with pinning off. Without workers the loader would pin on this producer
    thread, one copy thread, where the staging pool has several.
    """
    return _works_ahead(loader, backend) and not loader.pin_memory


def _match_intra_op_threads(wanted: int) -> None:
    """Give this (new) thread the intra-op thread count the consumer's thread has.

    Why: torch's intra-op thread count is per thread. A new thread takes it lazily from a
    process-wide value that the *last* `torch.set_num_threads` call wrote, from any thread,
    and DataLoader's pin-memory thread calls `set_num_threads(1)`. So after any
    `DataLoader(pin_memory=True)` has run in the process, a loader iterated on our producer
    thread would run its CPU transforms on one core while the same loader on the main thread
    uses all of them: an input-starved loop ran at 61 ms per step with prefetching, 39 ms
    without (H200 run 1, `benchmarks/input_pipeline_notes.md`). Staging copies of contiguous
    tensors run on numpy in their own threads (`staging.py`), not on this thread's team.
    Note `set_num_threads` here also rewrites what later new threads inherit: the consumer's
    count, i.e. the process's own setting, not the pin thread's 1.
    """
    if wanted >= 1 and torch.get_num_threads() != wanted:
        torch.set_num_threads(wanted)


def _put(q: queue.Queue, item: Any, stop: threading.Event) -> bool:
    """Put unless the consumer has gone away; returns False if it has."""
    while not stop.is_set():
        try:
            q.put(item, timeout=_POLL_S)
            return True
        except queue.Full:
            continue
    return False


def prefetch(
    loader: Iterable,
    device: str | torch.device = "cuda",
    *,
    depth: int = 2,
    transform: Callable[[Any], Any] | None = None,
    memory_format: torch.memory_format | None = None,
    num_threads: int | None = None,
    producer: str = "auto",
) -> Prefetcher:
    """Wrap `loader` so its batches arrive on `device`, copied ahead on a side stream.

    `depth` batches are copied ahead while one is consumed. `transform(batch)` runs on the
    device copy (e.g. `Normalize` turning uint8 images into bf16). `memory_format` applies
    to every 4-D tensor (e.g. `torch.channels_last`). `len()`, `.sampler` and `.dataset`
    pass through to the loader. On CPU, batches pass through unchanged (then `transform`).
    `producer` says who pulls batches and issues their copies: "auto" (the default: the
    training thread, `depth` batches ahead, for a DataLoader with worker processes, which load
    and pin ahead on their own; a background thread otherwise), "thread" (a background thread
    for every loader) or "inline" (the training thread for every loader).
    """
    return Prefetcher(
        loader,
        device,
        depth=depth,
        transform=transform,
        memory_format=memory_format,
        num_threads=num_threads,
        producer=producer,
    )
