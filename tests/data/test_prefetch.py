"""The prefetcher's threaded machinery, run on the CPU through HostBackend.

Every batch arrives once, in order, for each batch type; loader errors surface at the
right batch; early breaks and many epochs leave no thread and no extra buffer behind.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import namedtuple

import pytest
import torch

from membound.data import Normalize, Prefetcher, prefetch
from membound.data.backend import HostBackend
from membound.errors import BadInput

Pair = namedtuple("Pair", ["image", "label"])


@dataclasses.dataclass
class Sample:
    image: torch.Tensor
    label: torch.Tensor


class Movable:
    """A batch object with its own pin_memory()/to(), recording the calls it gets."""

    def __init__(self, t, log):
        self.t, self.log = t, log

    def pin_memory(self):
        self.log.append("pin")
        return self

    def to(self, device, non_blocking=False):
        self.log.append(("to", str(device), non_blocking))
        return Movable(self.t.to(device, copy=True), self.log)


def _make(kind, i):
    img = torch.full((2, 3, 4, 4), float(i))
    lab = torch.tensor([i, i])
    return {
        "tensor": lambda: img,
        "tuple": lambda: (img, lab),
        "list": lambda: [img, lab, "meta"],
        "dict": lambda: {"img": img, "lab": lab, "n": i},
        "namedtuple": lambda: Pair(img, lab),
        "dataclass": lambda: Sample(img, lab),
    }[kind]()


def _first_tensor(b):
    if isinstance(b, torch.Tensor):
        return b
    if isinstance(b, dict):
        return b["img"]
    if isinstance(b, Sample):
        return b.image
    return b[0]


def _threads():
    return {t for t in threading.enumerate() if t.name.startswith("membound")}


@pytest.mark.parametrize("kind", ["tensor", "tuple", "list", "dict", "namedtuple", "dataclass"])
@pytest.mark.parametrize("pipelined", [True, False])
def test_every_batch_once_in_order(kind, pipelined):
    data = [_make(kind, i) for i in range(7)]
    pf = Prefetcher(data, "cpu", backend=HostBackend() if pipelined else None)
    assert pf.pipelined is pipelined
    out = list(pf)
    assert len(out) == len(data)
    for i, (got, src) in enumerate(zip(out, data, strict=True)):
        assert type(got) is type(src)
        g, s = _first_tensor(got), _first_tensor(src)
        assert torch.equal(g, s) and float(g.flatten()[0]) == i
        if pipelined:  # a real copy, not the loader's tensor
            assert g.data_ptr() != s.data_ptr()
    if kind == "list":
        assert out[3][2] == "meta"
    if kind == "dict":
        assert out[5]["n"] == 5


def test_staged_copies_survive_buffer_reuse():
    # The pool hands the same buffer to every batch; delivered batches must not change.
    data = [torch.full((1000,), float(i)) for i in range(10)]
    pf = Prefetcher(data, "cpu", backend=HostBackend(), depth=1)
    out = list(pf)
    assert [float(x[0]) for x in out] == list(range(10))
    assert all(bool((x == i).all()) for i, x in enumerate(out))
    assert pf.pool.allocations <= pf.pool.limit


def test_large_tensors_split_across_threads():
    data = [torch.randn(4, 1 << 20) for _ in range(3)]
    data.append(torch.randn(1 << 20, 4).t())  # non-contiguous source
    out = list(Prefetcher(data, "cpu", backend=HostBackend(), num_threads=3))
    assert all(torch.equal(a, b) for a, b in zip(out, data, strict=True))


@pytest.mark.parametrize("producer", ["thread", "inline"])
def test_loader_error_surfaces_at_its_batch(producer):
    def loader():
        for i in range(3):
            yield torch.tensor([i])
        raise ValueError("bad sample 3")

    got = []
    with pytest.raises(ValueError, match="bad sample 3"):
        for b in Prefetcher(loader(), "cpu", backend=HostBackend(), producer=producer):
            got.append(int(b))
    assert got == [0, 1, 2]
    assert not _threads()


# inline (depth 2), the copy of batch 2 is issued before batch 0 is handed over: it fails first
@pytest.mark.parametrize("producer, before", [("thread", [0.0, 1.0]), ("inline", [])])
def test_staging_error_surfaces_and_buffers_return(producer, before):
    class Failing(HostBackend):
        def to_device(self, t):
            if float(t.flatten()[0]) == 2:
                raise RuntimeError("copy failed")
            return super().to_device(t)

    data = [torch.full((8,), float(i)) for i in range(5)]
    pf = Prefetcher(data, "cpu", backend=Failing(), producer=producer)
    got = []
    with pytest.raises(RuntimeError, match="copy failed"):
        for b in pf:
            got.append(float(b[0]))
    assert got == before
    assert not any(b.busy for v in pf.pool.buffers.values() for b in v)


def test_early_break_and_many_epochs_leave_nothing_behind():
    data = [torch.randn(64, 64) for _ in range(20)]
    pf = Prefetcher(data, "cpu", backend=HostBackend(), depth=3)
    before = threading.active_count()
    for _epoch in range(5):
        for i, _b in enumerate(pf):
            if i == 2:
                break  # producer is blocked on a full queue here
        assert not _threads()
        assert len(list(pf)) == 20
        assert not _threads()
    assert threading.active_count() == before
    counts = pf.pool.count()
    allocs = pf.pool.allocations
    for _ in range(3):
        list(pf)
    assert pf.pool.count() == counts and pf.pool.allocations == allocs


@pytest.mark.parametrize("producer", ["thread", "inline"])
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("kind", ["tuple", "dict", "dataclass"])
def test_batches_are_freed_without_the_garbage_collector(kind, workers, producer):
    # Every batch used to sit in a reference cycle (flatten's closure) until a collection
    # freed it. On CUDA those are device tensors with recorded streams; a DataLoader worker
    # forked before the collection freed them in the child, called CUDA there and died.
    import gc

    data = [_make(kind, i) for i in range(8)]
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for full in (True, False):
            loader = torch.utils.data.DataLoader(data, batch_size=None, num_workers=workers)
            pf = Prefetcher(loader, "cpu", backend=HostBackend(), depth=2, producer=producer)
            it = iter(pf)
            for i, b in enumerate(it):
                assert float(_first_tensor(b)[0, 0, 0, 0]) == i
                if not full and i == 2:
                    break
            it.close()
            del it, b, pf
        gc.collect()
        left = [o for o in gc.garbage if isinstance(o, torch.Tensor)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()
    assert left == []


def test_abandoned_iterator_is_cleaned_up():
    it = iter(Prefetcher([torch.ones(4)] * 10, "cpu", backend=HostBackend(), depth=1))
    next(it)
    time.sleep(0.05)
    assert _threads()
    it.close()
    assert not _threads()


def test_loader_sees_fresh_iterator_each_epoch_and_len_passthrough():
    ds = torch.utils.data.TensorDataset(torch.arange(10.0).view(10, 1))
    dl = torch.utils.data.DataLoader(ds, batch_size=3)
    pf = prefetch(dl, "cpu")
    assert len(pf) == 4 and pf.dataset is ds and pf.sampler is dl.sampler
    for _ in range(2):
        flat = torch.cat([b[0] for b in Prefetcher(dl, "cpu", backend=HostBackend())])
        assert torch.equal(flat.flatten(), torch.arange(10.0))


def test_movable_objects_are_pinned_then_moved():
    log = []  # a backend that pins: the pinning branch on the CPU
    out = list(Prefetcher([Movable(torch.ones(2), log)], "cpu", backend=HostBackend(pins=True)))
    assert log == ["pin", ("to", "cpu", True)]
    assert torch.equal(out[0].t, torch.ones(2))


def test_transform_and_memory_format_applied():
    u8 = torch.randint(0, 256, (2, 3, 5, 5), dtype=torch.uint8)
    labels = torch.tensor([1, 2])
    for backend in (HostBackend(), None):
        ((img, lab),) = list(
            Prefetcher(
                [(u8, labels)],
                "cpu",
                backend=backend,
                transform=Normalize([0.5] * 3, [0.25] * 3, torch.float32),
                memory_format=torch.channels_last,
            )
        )
        assert img.dtype == torch.float32 and img.is_contiguous(memory_format=torch.channels_last)
        torch.testing.assert_close(img, (u8.float() / 255 - 0.5) / 0.25)
        assert torch.equal(lab, labels)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA fallback")
def test_cuda_request_without_cuda_passes_through():
    data = [torch.ones(3)]
    pf = prefetch(data)
    assert not pf.pipelined
    assert list(pf)[0] is data[0]


def test_bad_arguments():
    with pytest.raises(BadInput, match="depth"):
        prefetch([], "cpu", depth=0)
    with pytest.raises(BadInput, match="callable"):
        prefetch([], "cpu", transform=3)


@pytest.mark.parametrize("depth", [1, 3])
def test_reads_at_most_depth_batches_ahead(depth):
    pulled = []

    def loader():
        for i in range(20):
            pulled.append(i)
            yield torch.tensor([i])

    it = iter(Prefetcher(loader(), "cpu", backend=HostBackend(), depth=depth))
    assert int(next(it)) == 0
    time.sleep(0.3)  # let the producer run as far ahead as it may
    # depth ready in the queue + one staged and waiting to be queued (+ the one delivered).
    assert len(pulled) == depth + 2
    it.close()
    assert not _threads()


def test_consumer_exception_cleans_up():
    with pytest.raises(ZeroDivisionError):
        for _b in Prefetcher([torch.ones(2)] * 10, "cpu", backend=HostBackend()):
            1 / 0  # noqa: B018
    assert not _threads()


class AsyncHostBackend(HostBackend):
    """Device copies run later on a 'copy engine' thread, reading the staging buffer then.

    Mimics a CUDA stream: work is queued in order, events complete when the engine reaches
    them. If the pool handed out a buffer before the copy reading it ran, data would mix.
    """

    def __init__(self, delay_s=0.002):
        super().__init__()
        import queue as _q

        self.jobs = _q.Queue()
        self.delay_s = delay_s
        self.engine = threading.Thread(target=self._run, name="fake-copy-engine", daemon=True)
        self.engine.start()

    def _run(self):
        while (job := self.jobs.get()) is not None:
            job()

    def new_event(self):
        return _ThreadEvent()

    def to_device(self, t):
        out = torch.empty_like(t)

        def job():
            time.sleep(self.delay_s)
            out.copy_(t)

        self.jobs.put(job)
        return out

    def record(self, event):
        self.jobs.put(event.flag.set)

    def consumer_wait(self, event):
        event.flag.wait()

    def close(self):
        self.jobs.put(None)
        self.engine.join()


class _ThreadEvent:
    def __init__(self):
        self.flag = threading.Event()

    def query(self):
        return self.flag.is_set()

    def synchronize(self):
        self.flag.wait()


@pytest.mark.parametrize("depth", [1, 2])
def test_no_buffer_reused_before_its_copy_ran(depth):
    backend = AsyncHostBackend()
    data = [(torch.full((50_000,), float(i)), torch.full((3,), -float(i))) for i in range(30)]
    pf = Prefetcher(data, "cpu", backend=backend, depth=depth)
    try:
        for _epoch in range(2):
            for i, (x, y) in enumerate(pf):
                assert bool((x == i).all()) and bool((y == -i).all()), i
        # The pool stayed within its limit, so it must have waited on pending copies.
        assert pf.pool.count() <= pf.pool.limit == (depth + 2) * 2
    finally:
        backend.close()
    assert not _threads()


def _set_threads_from_another_thread(n):
    # What DataLoader's pin-memory thread does: `torch.set_num_threads(1)` on its own thread,
    # which also becomes the count every *new* thread starts with.
    t = threading.Thread(target=torch.set_num_threads, args=(n,))
    t.start()
    t.join()


def test_loader_runs_with_the_consumers_intra_op_threads():
    # H200 run 1: after a pin_memory DataLoader had run, a CPU-heavy loader iterated on the
    # producer thread got 1 torch thread instead of the main thread's count, and the
    # prefetched input-starved loop ran 1.56x slower than the plain one.
    seen = []

    def loader():
        for i in range(3):
            seen.append(torch.get_num_threads())  # runs on the producer thread
            yield torch.tensor([i])

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(3)  # the consumer's choice (this thread only)
        _set_threads_from_another_thread(1)
        fresh = []
        t = threading.Thread(target=lambda: fresh.append(torch.get_num_threads()))
        t.start()
        t.join()
        assert fresh == [1], "precondition: a new thread inherits the last set_num_threads"
        assert torch.get_num_threads() == 3
        out = [int(b) for b in Prefetcher(loader(), "cpu", backend=HostBackend())]
        assert out == [0, 1, 2]
        assert seen == [3, 3, 3]
        assert torch.get_num_threads() == 3  # the consumer's own count is left alone
    finally:
        torch.set_num_threads(before)
        _set_threads_from_another_thread(before)
    assert not _threads()


def test_transform_runs_on_the_producer_thread_not_the_consumer():
    # The consumer (training) thread should only wait and launch: the transform runs where
    # the copies are issued, before the batch's event is recorded.
    seen = []

    def transform(batch):
        seen.append(threading.current_thread())
        return batch * 2

    data = [torch.full((4,), float(i)) for i in range(5)]
    out = list(Prefetcher(data, "cpu", backend=HostBackend(), transform=transform))
    assert [o.tolist() for o in out] == [[2.0 * i] * 4 for i in range(5)]
    assert len(seen) == 5 and all(t is not threading.main_thread() for t in seen)


def test_transform_of_batches_with_opaque_objects_runs_at_delivery():
    # Objects that move themselves are copied on the consumer's stream at delivery, so a
    # transform over the whole batch must wait for them: it runs on the consumer thread.
    class Box:
        def __init__(self, t):
            self.t = t

        def pin_memory(self):
            return self

        def to(self, *args, **kwargs):
            return Box(self.t.clone())

    seen = []

    def transform(batch):
        seen.append(threading.current_thread())
        return batch

    data = [(torch.ones(2), Box(torch.zeros(2))) for _ in range(3)]
    out = list(Prefetcher(data, "cpu", backend=HostBackend(), transform=transform))
    assert len(out) == 3 and all(isinstance(b[1], Box) for b in out)
    assert seen and all(t is threading.main_thread() for t in seen)


def test_staged_sources_are_dropped_on_the_producer_thread():
    """A worker's batch lives in shared memory and whoever drops it last unmaps it: once its
    host copy is staged, the prefetcher drops it on its own thread, never on the training
    thread (the slot used to keep every source until the batch was delivered)."""
    import weakref

    freed_on: list[str] = []

    def loader():
        for i in range(6):
            t = torch.full((64, 64), float(i))
            weakref.finalize(t, lambda: freed_on.append(threading.current_thread().name))
            yield {"x": t, "i": i}
            del t

    got = [int(b["x"][0, 0]) for b in Prefetcher(loader(), "cpu", backend=HostBackend(), depth=2)]
    assert got == list(range(6))
    assert len(freed_on) == 6 and set(freed_on) == {"membound-prefetch"}


def _pin_flag_seen(monkeypatch) -> list[bool]:
    """Record DataLoader.pin_memory each time an iterator is made from a DataLoader."""
    seen: list[bool] = []
    real = torch.utils.data.DataLoader._get_iterator

    def spy(self):
        seen.append(self.pin_memory)
        return real(self)

    monkeypatch.setattr(torch.utils.data.DataLoader, "_get_iterator", spy)
    return seen


@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true")
def test_worker_loader_pins_its_own_batches_then_is_left_as_it_was(monkeypatch):
    # On the H200 the loader's own pin thread + the side-stream copy beat staging in the
    # prefetcher (prefetch.py `_iter_loader`): a worker DataLoader without pinning is made
    # to pin for the prefetcher's iterations only, and its flag is restored each time.
    seen = _pin_flag_seen(monkeypatch)
    ds = torch.utils.data.TensorDataset(torch.arange(12.0))
    dl = torch.utils.data.DataLoader(ds, batch_size=3, num_workers=1)
    pf = Prefetcher(dl, "cpu", backend=HostBackend(pins=True))
    for _epoch in range(2):
        got = torch.cat([b[0] for b in pf])
        assert got.tolist() == list(range(12))
        assert pf.loader_pinned
        assert dl.pin_memory is False
    assert seen == [True, True]


@pytest.mark.parametrize(
    "workers, pin, pins, expected",
    [
        (1, False, True, True),
        (0, False, True, False),  # no pin thread: it would pin on the producer thread
        (1, True, True, False),  # pins already
        (1, False, False, False),  # a backend that does not pin (CPU)
    ],
)
@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true")
def test_loader_pins_only_with_workers_and_a_pinning_backend(
    monkeypatch, workers, pin, pins, expected
):
    seen = _pin_flag_seen(monkeypatch)
    backend = HostBackend(pins=True) if pins else HostBackend()
    dl = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.arange(6.0)),
        batch_size=2,
        num_workers=workers,
        pin_memory=pin,
    )
    pf = Prefetcher(dl, "cpu", backend=backend)
    assert sum(len(b[0]) for b in pf) == 6
    assert pf.loader_pinned is expected
    assert seen == [pin or expected]
    assert dl.pin_memory is pin


def test_plain_iterables_are_never_asked_to_pin():
    pf = Prefetcher([torch.ones(2)] * 3, "cpu", backend=HostBackend(pins=True))
    assert len(list(pf)) == 3
    assert not pf.loader_pinned


@pytest.mark.parametrize("producer", ["thread", "inline"])
@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true")
def test_persistent_workers_keep_their_iterator_across_epochs(monkeypatch, producer):
    # a persistent-workers loader makes its iterator (and pin thread) once and resets it for
    # later epochs: every epoch still yields every batch, and the flag stays restored
    seen = _pin_flag_seen(monkeypatch)
    ds = torch.utils.data.TensorDataset(torch.arange(8.0))
    dl = torch.utils.data.DataLoader(ds, batch_size=2, num_workers=1, persistent_workers=True)
    pf = Prefetcher(dl, "cpu", backend=HostBackend(pins=True), producer=producer)
    for _epoch in range(3):
        assert torch.cat([b[0] for b in pf]).tolist() == list(range(8))
        assert dl.pin_memory is False
    assert seen == [True]  # made once, then reset
