"""The prefetcher and the guard on a real GPU (marked gpu: skipped without CUDA)."""

from __future__ import annotations

import gc
import threading
import warnings

import pytest
import torch

from membound.data import Normalize, PageableCopyWarning, Prefetcher, prefetch, strict_copies

pytestmark = pytest.mark.gpu


def _batches(n=12, pinned=False):
    g = torch.Generator().manual_seed(0)
    out = []
    for i in range(n):
        img = torch.randn(16, 3, 64, 64, generator=g)
        u8 = torch.randint(0, 256, (16, 3, 64, 64), dtype=torch.uint8, generator=g)
        lab = torch.randint(0, 1000, (16,), generator=g)
        nc = torch.randn(64, 32, generator=g).t()  # non-contiguous
        b = {"img": img, "u8": u8, "lab": lab, "nc": nc, "half": img.half(), "i": i}
        if pinned:
            b = {k: v.pin_memory() if isinstance(v, torch.Tensor) else v for k, v in b.items()}
        out.append(b)
    return out


@pytest.mark.parametrize("producer", ["thread", "inline"])
@pytest.mark.parametrize("pinned", [False, True])
@pytest.mark.parametrize("depth", [1, 3])
def test_bit_identical_to_plain_cuda_loop(pinned, depth, producer):
    data = _batches(pinned=pinned)
    got = []
    for b in prefetch(data, "cuda", depth=depth, producer=producer):
        got.append({k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in b.items()})
    assert [b["i"] for b in got] == list(range(len(data)))
    for b, src in zip(got, data, strict=True):
        for k, v in src.items():
            if isinstance(v, torch.Tensor):
                ref = v.cuda()
                assert b[k].is_cuda and b[k].dtype == ref.dtype
                assert torch.equal(b[k], ref), k


def test_uint8_transport_with_normalize_matches_plain_path():
    data = [(b["u8"], b["lab"]) for b in _batches()]
    norm = Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225], channels_last=True)
    for (img, lab), (u8, l_src) in zip(prefetch(data, transform=norm), data, strict=True):
        assert img.dtype == torch.bfloat16 and img.is_contiguous(memory_format=torch.channels_last)
        assert torch.equal(img, norm(u8.cuda())) and torch.equal(lab, l_src.cuda())


@pytest.mark.parametrize("producer", ["thread", "inline"])
@pytest.mark.parametrize("depth", [1, 2, 4])
def test_no_use_before_copy_under_stress(depth, producer):
    # The consumer's stream lags far behind (a sleep kernel), then reads and wrecks each
    # batch in place: a batch read before its copy landed, or memory handed to the next
    # copy while still in use, changes the sums.
    n = 40
    data = [torch.full((1 << 20,), float(i)) for i in range(n)]
    data = [(x + torch.arange(x.numel()) % 7) for x in data]
    expected = [float(x.double().sum()) for x in data]
    sums = []
    for x in prefetch(data, depth=depth, producer=producer):
        torch.cuda._sleep(200_000)
        sums.append(x.double().sum())
        x.mul_(-3).add_(1)
        del x
    torch.cuda.synchronize()
    assert [float(s) for s in sums] == expected


@pytest.mark.parametrize("producer", ["thread", "inline"])
def test_memory_and_threads_flat_over_20_epochs(producer):
    data = _batches(n=6)
    pf = Prefetcher(data, "cuda", depth=2, producer=producer)
    base_threads = threading.active_count()
    marks = {}
    for epoch in range(20):
        for i, b in enumerate(pf):
            b["img"].add_(1)
            if epoch % 3 == 0 and i == 2:
                break  # early breaks too
        del b
        torch.cuda.synchronize()
        gc.collect()
        if epoch in (2, 19):
            marks[epoch] = (
                torch.cuda.memory_allocated(),
                torch.cuda.memory_reserved(),
                pf.pool.count(),
                pf.pool.nbytes(),
            )
    # GPU memory is exactly flat; the pinned pool may still add buffers lazily (a buffer whose
    # copy has not completed is not waited on while the pool is under its limit), but never
    # past its bound: `slots` batches in flight.
    gpu = {e: m[:2] for e, m in marks.items()}
    assert gpu[2] == gpu[19], marks
    assert marks[19][2] <= pf.pool.limit, (marks, pf.pool.limit)
    assert marks[19][3] <= pf.pool.limit * max(
        b.data.numel() for v in pf.pool.buffers.values() for b in v
    )
    assert threading.active_count() == base_threads
    assert pf._backend.stream is pf._get_backend().stream  # one stream for its whole life


@pytest.mark.parametrize("producer", ["thread", "auto"])
def test_pageable_input_from_dataloader_workers(producer):
    ds = torch.utils.data.TensorDataset(torch.randn(64, 3, 8, 8), torch.arange(64))
    for pin in (False, True):
        dl = torch.utils.data.DataLoader(ds, batch_size=16, num_workers=2, pin_memory=pin)
        pf = prefetch(dl, producer=producer)
        out = list(pf)
        assert pf.produced_by == ("inline" if producer == "auto" else producer)
        assert torch.equal(torch.cat([b[1] for b in out]).cpu(), torch.arange(64))
        assert torch.equal(torch.cat([b[0] for b in out]), ds.tensors[0].cuda())


def test_guard_fires_on_pageable_not_on_pinned():
    pageable, pinned = torch.randn(1024), torch.randn(1024).pin_memory()
    dst = torch.empty(1024, device="cuda")
    with strict_copies() as guard, warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        pageable.cuda(non_blocking=True)
        pageable.to("cuda", non_blocking=True)
        dst.copy_(pageable, non_blocking=True)
        pinned.cuda(non_blocking=True)
        pinned.to("cuda", non_blocking=True)
        dst.copy_(pinned, non_blocking=True)
        pageable.cuda()  # blocking on purpose: honest, not reported
    hits = [x for x in w if issubclass(x.category, PageableCopyWarning)]
    assert len(hits) == 3 and sum(guard.sites.values()) == 3
    assert all(h.filename == __file__ for h in hits)


def test_prefetch_never_trips_the_guard():
    with strict_copies("raise"):
        out = list(prefetch(_batches(n=4)))
    assert len(out) == 4


def test_every_copy_seen_on_the_device_and_from_pinned_memory(tmp_path):
    # The benchmark's H2D columns come from these device-side records; copies issued by the
    # producer thread must all be there, each from pinned memory, at a rate no link exceeds.
    import json

    from torch.profiler import ProfilerActivity, profile

    data = _batches(n=6)
    want = sum(v.numel() * v.element_size() for b in data for v in b.values() if torch.is_tensor(v))
    pf = prefetch(data, "cuda", depth=2)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        n = sum(1 for _ in pf)
        torch.cuda.synchronize()
    assert n == len(data)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    h2d = [
        e
        for e in json.loads(path.read_text())["traceEvents"]
        if e.get("cat") == "gpu_memcpy" and "HtoD" in e.get("name", "")
    ]
    assert sum(e["args"]["bytes"] for e in h2d) == want
    assert all("Pinned" in e["name"] for e in h2d), {e["name"] for e in h2d}
    big = [e for e in h2d if e["args"]["bytes"] >= 1 << 16]
    assert big and sum(e["args"]["bytes"] for e in big) / (sum(e["dur"] for e in big) * 1e3) < 100


def _collect_in_worker(_worker_id):
    gc.collect()  # frees, in the forked child, whatever the parent left to the collector


def test_a_loader_forked_after_prefetching_survives_its_garbage_collector():
    # Found on the H200: a DataLoader worker forked after membound.data.prefetch had run in
    # the process died with a CUDA initialization error, because its collector freed the
    # prefetcher's leftover device tensors (recorded streams: the free calls CUDA). Batches
    # must be freed by reference count, so nothing of them is left for the child's collector.
    import multiprocessing

    enabled = gc.isenabled()
    gc.collect()
    gc.disable()  # the parent's collection must not hide leftovers by running first
    try:
        it = iter(prefetch(_batches(), "cuda", depth=2))
        for i, b in enumerate(it):
            b["img"].add_(1)
            if i == 3:
                break
        it.close()
        del it, b
        torch.cuda.synchronize()
        loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(torch.arange(8.0)),
            batch_size=2,
            num_workers=2,
            worker_init_fn=_collect_in_worker,
            multiprocessing_context=multiprocessing.get_context("fork"),
        )
        assert sum(float(x.sum()) for (x,) in loader) == 28.0
    finally:
        if enabled:
            gc.enable()
