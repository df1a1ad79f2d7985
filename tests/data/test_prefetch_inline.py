"""The prefetcher's inline producer (the training thread pulls and issues the copies, `depth`
batches ahead), "auto" choosing it for worker-process DataLoaders, and auto being the default, on the CPU
through HostBackend."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from membound.data import Prefetcher, prefetch
from membound.data.backend import HostBackend
from membound.errors import BadInput


class _Recording(HostBackend):
    """Records each device copy (the first value of the tensor copied) and the thread that
    issued it."""

    def __init__(self) -> None:
        super().__init__()
        self.copied: list[int] = []
        self.threads: set[str] = set()

    def to_device(self, t):
        self.copied.append(int(t.flatten()[0]))
        self.threads.add(threading.current_thread().name)
        return super().to_device(t)


def _membound_threads() -> set:
    return {t for t in threading.enumerate() if t.name.startswith("membound")}


def _worker_loader(n: int = 12, batch: int = 3, workers: int = 1, pin: bool = False):
    ds = torch.utils.data.TensorDataset(torch.arange(float(n)))
    return torch.utils.data.DataLoader(ds, batch_size=batch, num_workers=workers, pin_memory=pin)


def test_bad_producer_is_one_clear_error():
    with pytest.raises(BadInput, match="producer must be one of thread, inline, auto"):
        prefetch([], "cpu", producer="process")


@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true")
def test_auto_is_the_default_inline_for_a_worker_loader_a_thread_for_a_list():
    # auto became the default once inline was timed level with pin_memory on the H100
    # (2026-12-06, bench_truth's membound-prefetch-inline; docs/remedies.md)
    assert Prefetcher([], "cpu").producer == prefetch([], "cpu").producer == "auto"
    pf = prefetch(_worker_loader(workers=1), "cpu")
    pf._backend = HostBackend(pins=True)
    assert torch.cat([b[0] for b in pf]).tolist() == [float(x) for x in range(12)]
    assert pf.produced_by == "inline" and pf.loader_pinned
    pf = prefetch([torch.full((3,), float(i)) for i in range(4)], "cpu")
    pf._backend = HostBackend(pins=True)
    assert torch.cat(list(pf)).numel() == 12
    assert pf.produced_by == "thread"


@pytest.mark.parametrize(
    "loader, pins, expected",
    [
        ("workers", True, "inline"),  # the DataLoader's workers and pin thread work ahead
        ("no-workers", True, "thread"),  # it would load on the training thread
        ("list", True, "thread"),  # a plain iterable: nothing works ahead of the loop
        ("workers", False, "thread"),  # a backend that does not pin
    ],
)
@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true")
def test_auto_is_inline_only_for_worker_loaders_that_pin(loader, pins, expected):
    src = {
        "workers": lambda: _worker_loader(workers=1),
        "no-workers": lambda: _worker_loader(workers=0),
        "list": lambda: [torch.full((3,), float(i)) for i in range(4)],
    }[loader]()
    pf = Prefetcher(src, "cpu", backend=HostBackend(pins=pins), producer="auto")
    assert pf.produced_by is None
    got = torch.cat([b[0] if isinstance(b, list) else b for b in pf])
    assert got.numel() == 12
    assert pf.produced_by == expected


@pytest.mark.parametrize("producer", ["thread", "inline"])
def test_the_producer_asked_for_is_used(producer):
    data = [torch.full((4,), float(i)) for i in range(6)]
    backend = _Recording()
    out = list(Prefetcher(data, "cpu", backend=backend, producer=producer))
    assert [float(x[0]) for x in out] == list(range(6))
    assert backend.copied == list(range(6))
    main = threading.current_thread().name
    if producer == "inline":
        assert backend.threads == {main}
    else:
        assert backend.threads == {"membound-prefetch"}


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_inline_issues_the_next_depth_copies_before_handing_a_batch_over(depth):
    # when batch i reaches the loop, batches i+1 .. i+depth have their copies issued (they
    # overlap batch i's step), and nothing further has been read from the loader
    pulled: list[int] = []

    def loader():
        for i in range(10):
            pulled.append(i)
            yield torch.full((2,), float(i))

    backend = _Recording()
    for i, b in enumerate(
        Prefetcher(loader(), "cpu", backend=backend, depth=depth, producer="inline")
    ):
        assert float(b[0]) == i
        last = min(i + depth, 9)
        assert pulled == list(range(last + 1))
        assert backend.copied == list(range(last + 1))
    assert not _membound_threads()


@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true")
def test_inline_early_breaks_and_epochs_leave_nothing_behind():
    dl = _worker_loader(n=30, batch=2, workers=2)
    pf = Prefetcher(dl, "cpu", backend=HostBackend(pins=True), depth=2, producer="auto")
    before = threading.active_count()
    for _epoch in range(3):
        for i, _b in enumerate(pf):
            if i == 3:
                break
        assert torch.cat([b[0] for b in pf]).tolist() == [float(x) for x in range(30)]
        assert pf.produced_by == "inline" and pf.loader_pinned
        assert dl.pin_memory is False  # the user's loader is left as it was
    assert not _membound_threads()
    # the last iterator's workers, pin thread and queue feeders end as it is dropped;
    # multiprocessing's feeder threads take a moment to notice
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() == before, threading.enumerate()


def test_inline_transform_runs_before_the_batch_is_handed_over():
    calls: list[float] = []

    def transform(x):
        calls.append(float(x[0]))
        return x * 2

    out = list(
        Prefetcher(
            [torch.full((2,), float(i)) for i in range(4)],
            "cpu",
            backend=HostBackend(),
            transform=transform,
            depth=1,
            producer="inline",
        )
    )
    assert [float(x[0]) for x in out] == [0.0, 2.0, 4.0, 6.0]
    assert calls == [0.0, 1.0, 2.0, 3.0]
