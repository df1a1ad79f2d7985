"""The staging pool: reuses buffers, never hands out one a pending copy still reads."""

from __future__ import annotations

import pytest
import torch

from membound.data.staging import GRANULE, HostCopier, StagingPool


class FakeEvent:
    """A device copy that has not finished until someone waits for it."""

    def __init__(self):
        self.done = False
        self.waited = 0

    def query(self):
        return self.done

    def synchronize(self):
        self.waited += 1
        self.done = True


def _pool(slots=2):
    return StagingPool(lambda n: torch.empty(n, dtype=torch.uint8), slots=slots)


def test_reuses_finished_buffers_only():
    pool = _pool(slots=3)
    a = pool.acquire(1000)
    ev = FakeEvent()
    pool.release(a, ev)
    b = pool.acquire(1000)  # a's copy still pending -> a new buffer
    assert b is not a and pool.allocations == 2
    ev.done = True
    pool.release(b, None)
    c = pool.acquire(900)  # same size class, finished -> reused, no allocation
    assert c in (a, b) and pool.allocations == 2
    assert a.data.numel() == GRANULE


def test_at_the_limit_waits_for_the_oldest_copy():
    pool = _pool(slots=2)
    bufs = [pool.acquire(5000) for _ in range(2)]
    evs = [FakeEvent(), FakeEvent()]
    for b, e in zip(bufs, evs, strict=True):
        pool.release(b, e)
    got = pool.acquire(5000)
    assert got is bufs[0] and evs[0].waited == 1 and evs[1].waited == 0
    assert pool.count() == 2


def test_other_sizes_are_evicted_to_stay_bounded():
    pool = _pool(slots=2)
    for size in (1 << 20, 2 << 20, 3 << 20, 1 << 20):
        b = pool.acquire(size)
        pool.release(b, FakeEvent())
        assert pool.count() <= pool.limit
    assert pool.nbytes() <= 2 * (3 << 20)


def test_reserve_raises_limit_and_exhaustion_is_an_error():
    pool = _pool(slots=1)
    pool.reserve(2)
    pool.acquire(10)
    pool.acquire(10)
    with pytest.raises(RuntimeError, match="exhausted"):
        pool.acquire(10)


def test_views_have_the_right_dtype_and_shape():
    pool = _pool()
    like = torch.randn(3, 5, dtype=torch.float64)
    v = pool.acquire(like.numel() * 8).view(like)
    assert v.shape == like.shape and v.dtype == like.dtype and v.is_contiguous()


@pytest.mark.parametrize("threads", [1, 3])
def test_copier_copies_everything(threads):
    copier = HostCopier(threads)
    srcs = [
        torch.randn(3 << 18),
        torch.randn(7),
        torch.randn(1 << 18, 3).t(),  # non-contiguous: torch's copy
        torch.randn(5 << 18).to(torch.bfloat16),  # no numpy dtype: copied as bytes
        torch.rand(3 << 20) > 0.5,
        torch.empty(0),
        torch.randn(1 << 17, dtype=torch.complex64).conj(),  # lazy conjugate bit
    ]
    dsts = [torch.empty(s.shape, dtype=s.dtype) for s in srcs]
    copier.copy(list(zip(dsts, srcs, strict=True)))
    copier.close()
    assert all(torch.equal(d, s) for d, s in zip(dsts, srcs, strict=True))
