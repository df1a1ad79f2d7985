"""The input-pipeline benchmark's H2D accounting (benchmarks/bench_input_pipeline.py).

Run 1 summed the profiler's per-op memcpy times, which miss copies issued from other threads
(a prefetcher's), and reported 215 GB/s over a 54 GB/s link. The benchmark now reads the
device-side memcpy records of the chrome trace: these tests pin down that arithmetic.
"""

from __future__ import annotations

import pytest

from support.paths import benchmark


@pytest.fixture(scope="module")
def bench():
    return benchmark("bench_input_pipeline")


def _copy(name, nbytes, dur_us, cat="gpu_memcpy"):
    args = {"device": 0, "stream": 7, "bytes": nbytes}
    return {"ph": "X", "cat": cat, "name": name, "ts": 0.0, "dur": dur_us, "args": args}


def test_rate_is_bytes_over_copy_engine_time(bench):
    trace = {
        "traceEvents": [
            _copy("Memcpy HtoD (Pinned -> Device)", 38_535_168, 700.0),
            _copy("Memcpy HtoD (Pinned -> Device)", 512, 2.0),
            _copy("Memcpy HtoD (Pageable -> Device)", 38_535_168, 4_800.0),
            _copy("Memcpy DtoH (Device -> Pinned)", 1 << 20, 50.0),  # not host→device
            _copy("Memcpy DtoD (Device -> Device)", 1 << 20, 5.0),
            _copy("Memset (Device)", 1 << 20, 5.0, cat="gpu_memset"),
            {"ph": "X", "cat": "kernel", "name": "gemm", "dur": 2500.0, "args": {}},
            {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "dur": 900.0, "args": {}},
        ]
    }
    n, nbytes, dur = bench.h2d_from_trace(trace)
    assert (n, nbytes, dur) == (3, 2 * 38_535_168 + 512, 5_502.0)
    # GB/s = bytes / ns, as the benchmark computes it: bounded by the slowest/fastest copy.
    assert 38_535_168 / 4_800e3 < nbytes / (dur * 1e3) < 38_535_168 / 700e3


def test_copies_from_other_threads_count_the_same(bench):
    # Device records carry no host thread: a copy issued on a producer thread (tid of the
    # stream, not of the profiled thread) must be counted like any other.
    a = _copy("Memcpy HtoD (Pinned -> Device)", 1000, 1.0)
    b = dict(_copy("Memcpy HtoD (Pinned -> Device)", 1000, 1.0), tid=99, pid=1)
    assert bench.h2d_from_trace({"traceEvents": [a, b]}) == (2, 2000, 2.0)


def test_missing_byte_count_is_an_error_not_a_zero(bench):
    e = _copy("Memcpy HtoD (Pinned -> Device)", 1000, 1.0)
    del e["args"]["bytes"]
    with pytest.raises(ValueError, match="byte count"):
        bench.h2d_from_trace({"traceEvents": [e]})


def test_seen_bytes_must_match_the_batch(bench):
    batch = 38_535_680
    assert bench.seen_ok(batch, batch)
    assert bench.seen_ok(batch * 7 / 8, batch)  # one copy in flight at a window edge
    assert not bench.seen_ok(batch / 4, batch)  # copies from another thread went unseen
    assert not bench.seen_ok(batch * 2, batch)
    assert not bench.seen_ok(float("nan"), batch)
