"""`pageable-copy` and `blocking-copy` against planted traces (hand-computed numbers)."""

from __future__ import annotations

import pytest

from membound.analysis import analyze
from support import tracebuilder
from support.analysis import by_code, run


def test_pageable_copy_in_the_input_pipeline(ceilings):
    a = run("synthetic_input_pipeline", ceilings)
    # pageable: (100 µs − 1 MB at 50 GB/s = 20 µs) + 900 µs idle inside aten::copy_ + 10 µs
    # until the next kernel starts
    pc = by_code(a)["pageable-copy"]
    assert pc.time_lost_ms_per_step == pytest.approx(0.08 + 0.91)
    assert pc.evidence["pinned_bandwidth_gb_s"] == pytest.approx(50.0)
    assert pc.evidence["pinned_bandwidth_source"] == "measured ceilings"
    assert pc.evidence["achieved_bandwidth_gb_s"] == pytest.approx(10.0)
    assert "membound.data.prefetch" in pc.fix
    # blocking-copy: 20 µs of pinned-equivalent copy per step = 0.4% of a step: below the floor
    assert "blocking-copy" not in by_code(a)
    # the H2D copy is PCIe time: it never becomes a roofline row of aten::copy_
    assert all(r.name != "aten::copy_" for r in a.ops)


def test_without_ceilings_pinned_rate_comes_from_the_trace_then_a_default(tmp_path):
    b = tracebuilder.planted_input_pipeline()
    b.device = "Mystery GPU 9000"  # no datasheet, nothing measured
    a = analyze([b.write(tmp_path / "a.json")])
    assert a.ceilings is None and a.ceilings_source is None
    assert any("no ceilings for device Mystery GPU 9000" in n for n in a.notes)
    pc = by_code(a)["pageable-copy"]
    assert pc.evidence["pinned_bandwidth_source"].startswith("typical PCIe Gen4")
    assert pc.time_lost_ms_per_step == pytest.approx(0.91 + (100 - 1e6 / 25e9 * 1e6) / 1e3)
    b.memcpy(4000, 20, 1_000_000, "Pinned")  # a pinned copy at 50 GB/s in the trace
    a = analyze([b.write(tmp_path / "b.json")])
    pc = by_code(a)["pageable-copy"]
    assert pc.evidence["pinned_bandwidth_source"] == "fastest pinned copy in this trace"
    assert pc.evidence["pinned_bandwidth_gb_s"] == pytest.approx(50.0)


def test_blocking_copy_counts_unoverlapped_pinned_copies(tmp_path, ceilings):
    b = tracebuilder.TraceBuilder()
    for s in range(2):
        o = s * 1000.0
        b.step(s, o, 1000.0)
        b.copy(o, 5, o + 10, 200, 10_000_000, "Pinned")  # 200 µs, no kernel during it
        b.launch("k", o + 6, o + 210, 700)
        b.copy(o + 7, 5, o + 300, 100, 5_000_000, "Pinned", stream=9)  # hidden under k
    a = analyze([b.write(tmp_path / "t.json")], ceilings)
    f = by_code(a)
    assert f["blocking-copy"].time_lost_ms_per_step == pytest.approx(0.2)
    assert "pageable-copy" not in f
