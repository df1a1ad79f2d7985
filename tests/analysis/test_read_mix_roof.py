"""HBM's roof follows an op's mix of reads and writes (issue 16): the four measured passes
(fill_ writes only, copy 1 : 1, `out = a + b` 2 : 1, sum reads only) at read shares 0, 1/2,
2/3 and 1, `hbm_rate` linear between them; each op row and each memory finding holds a call
to the rate of its own share of bytes read."""

from __future__ import annotations

import dataclasses
import math

import pytest

from membound.analysis import analyze
from membound.analysis.roofline import call_memory_roof, hbm_rate, memory_roof, place
from membound.device.ceilings import Ceilings
from membound.trace.capture_meta import timeline_in
from support.paths import FIXTURES

# a toy device: copy 1 TB/s, fill 1.5, add (2 : 1) 1.2, sum 1.4 TB/s; 100 TFLOP/s bf16
TOY = Ceilings(
    device="cuda", name="toy", memory_bandwidth=1e12, flops={"bf16": 1e14},
    write_bandwidth=1.5e12, read_mix_bandwidth=1.2e12, read_bandwidth=1.4e12,
)  # fmt: skip
COPY_ONLY = dataclasses.replace(
    TOY, write_bandwidth=None, read_mix_bandwidth=None, read_bandwidth=None
)


# ------------------------------------------------------------------------------ hbm_rate
def test_the_measured_passes_sit_at_their_read_shares():
    assert hbm_rate(TOY, 0.0) == 1.5e12  # fill_
    assert hbm_rate(TOY, 0.5) == 1e12  # copy
    assert hbm_rate(TOY, 2 / 3) == 1.2e12  # out = a + b: 2 of 3 buffers read
    assert hbm_rate(TOY, 8 / 12) == 1.2e12  # the share as a call's bytes give it
    assert hbm_rate(TOY, 1.0) == 1.4e12  # sum


def test_between_the_passes_the_rate_is_linear():
    assert hbm_rate(TOY, 0.25) == pytest.approx(1.25e12)  # half way from fill to copy
    assert hbm_rate(TOY, 7 / 12) == pytest.approx(1.1e12)  # half way from copy to add
    assert hbm_rate(TOY, 5 / 6) == pytest.approx(1.3e12)  # half way from add to sum


def test_beyond_the_measured_passes_the_nearest_is_held():
    assert hbm_rate(TOY, 1.2) == 1.4e12
    assert hbm_rate(TOY, -0.1) == 1.5e12
    no_sum = dataclasses.replace(TOY, read_bandwidth=None)
    assert hbm_rate(no_sum, 0.9) == hbm_rate(no_sum, 1.0) == 1.2e12  # the add's, held
    assert hbm_rate(no_sum, 7 / 12) == pytest.approx(1.1e12)


def test_a_pass_measured_below_the_copy_is_not_used():
    # the add below the copy: from the copy straight to the sum, never below the copy
    slow_mix = dataclasses.replace(TOY, read_mix_bandwidth=0.9e12)
    assert hbm_rate(slow_mix, 2 / 3) == pytest.approx(1e12 + 0.4e12 / 3)
    assert hbm_rate(slow_mix, 1.0) == 1.4e12
    # the sum below the copy (as on the H200: 4.19 against 4.28 TB/s): the add's, held
    slow_sum = dataclasses.replace(TOY, read_bandwidth=0.95e12)
    assert hbm_rate(slow_sum, 1.0) == hbm_rate(slow_sum, 0.8) == 1.2e12
    # both below: the copy for every read-mostly share
    both = dataclasses.replace(TOY, read_mix_bandwidth=0.9e12, read_bandwidth=0.95e12)
    assert {hbm_rate(both, s) for s in (0.5, 0.6, 2 / 3, 0.9, 1.0)} == {1e12}


def test_write_mostly_traffic_follows_the_fill_only_where_it_is_faster():
    slow_fill = dataclasses.replace(TOY, write_bandwidth=0.8e12)
    assert hbm_rate(slow_fill, 0.0) == hbm_rate(slow_fill, 0.25) == 1e12
    no_fill = dataclasses.replace(TOY, write_bandwidth=None)
    assert hbm_rate(no_fill, 0.0) == hbm_rate(no_fill, 1 / 3) == 1e12
    assert hbm_rate(no_fill, 2 / 3) == 1.2e12  # the read-mostly side is its own


def test_an_unknown_mix_gets_the_best_rate_of_traffic_that_reads_and_writes():
    assert hbm_rate(TOY, None) == hbm_rate(TOY, math.nan) == 1.2e12  # the add's
    slow_mix = dataclasses.replace(TOY, read_mix_bandwidth=0.9e12)
    assert hbm_rate(slow_mix, None) == 1e12  # the copy's


def test_only_the_copy_measured_gives_the_copy_rate_exactly():
    shares = (None, math.nan, 0.0, 0.2, 0.5, 2 / 3, 0.9, 1.0)
    assert {hbm_rate(COPY_ONLY, s) for s in shares} == {1e12}


def test_an_older_file_without_the_add_pass_places_every_share_at_the_copy_rate():
    """Ceilings measured before the 2 : 1 pass (the recorded H200 files: their fill ran at
    4.67 TB/s against a 4.28 copy) keep the roof they had: the copy's for any read share,
    the fill's for fills only."""
    older = dataclasses.replace(TOY, read_mix_bandwidth=None)
    assert {hbm_rate(older, s) for s in (None, 0.0, 0.25, 0.5, 0.9, 1.0)} == {1e12}
    assert call_memory_roof(older, 1e8, "fill", 0.0) == ("write", 1.5e12)
    assert call_memory_roof(older, 1e8, "pointwise", 0.0) == ("dram", 1e12)
    assert memory_roof(older, [1e8, 2e8], call_reads=[0.0, 2e8]) == ("dram", 1e12)


# ------------------------------------------------------------------------ the roofs of calls
def test_a_calls_hbm_roof_follows_its_read_share_below_l2_and_fill_rules():
    c = dataclasses.replace(TOY, l2_bandwidth=4e12, l2_bytes=50_000_000)
    assert call_memory_roof(c, 1e8, "pointwise", 2 / 3) == ("dram", 1.2e12)
    assert call_memory_roof(c, 1e8, "pointwise", None) == ("dram", 1.2e12)
    assert call_memory_roof(c, 1e8, "reduction", 1.0) == ("dram", 1.4e12)
    assert call_memory_roof(c, 1e7, "pointwise", 2 / 3) == ("l2", 4e12)  # fits in L2
    assert call_memory_roof(c, 1e8, "fill", 0.0) == ("write", 1.5e12)


def test_an_op_whose_calls_read_different_shares_is_held_to_each_calls_rate():
    # two adds (2 : 1, 1.2 TB/s) and a sum (reads only, 1.4 TB/s) of 100 MB each
    calls, reads = [1e8, 1e8, 1e8], [2e8 / 3, 2e8 / 3, 1e8]
    at_roof = 2 * 1e8 / 1.2e12 + 1e8 / 1.4e12
    name, rate = memory_roof(TOY, calls, call_reads=reads)
    assert name == "dram" and rate == pytest.approx(3e8 / at_roof)
    p = place(0, 3e8, 2 * at_roof, TOY, None, call_bytes=calls, call_reads=reads)
    assert p.attainable_seconds == pytest.approx(at_roof) and p.fraction == pytest.approx(0.5)
    # one share for every call: its rate, exactly; an iterator of calls reads the same
    assert memory_roof(TOY, iter([1e8, 2e8]), call_reads=iter([1e8, 2e8])) == ("dram", 1.4e12)
    # an unknown split: the unknown mix's rate
    assert memory_roof(TOY, calls) == ("dram", 1.2e12)
    assert memory_roof(TOY, calls, call_reads=[math.nan] * 3) == ("dram", 1.2e12)


# ------------------------------------------------------------- a trace's op rows and findings
#: the planted memory block (`tracebuilder.planted_memory_block`: per 5 ms step one fp32 add
#: of two 8192 x 1024 tensors in 0.6 ms, then a LayerNorm of its output in 0.15 ms) on the
#: test ceilings (copy 1 TB/s) with fill 1.5, add 1.25 and sum 1.4 TB/s (test values)
N = 8192 * 1024
ADD_BYTES, CHAINED = 3 * N * 4, 2 * N * 4
#: LayerNorm: x, weight and bias read; y, mean and rstd (one per row, fp32) written
LN_READS, LN_WRITES = 4 * (N + 2 * 1024), 4 * (N + 2 * 8192)
#: its read share is just below the copy's: on the line from the fill (0) to the copy (1/2)
LN_SHARE = LN_READS / (LN_READS + LN_WRITES)
LN_RATE = 1.5e12 + (1e12 - 1.5e12) * LN_SHARE / 0.5


def _mixed(ceilings, **rates):
    return dataclasses.replace(ceilings, **rates)


@pytest.fixture
def mix_ceilings(ceilings):
    return _mixed(
        ceilings, write_bandwidth=1.5e12, read_mix_bandwidth=1.25e12, read_bandwidth=1.4e12
    )


def test_op_rows_are_placed_at_the_rate_of_their_read_share(mix_ceilings):
    from support.analysis import run

    rows = {r.name: r for r in run("synthetic_memory_block", mix_ceilings).ops}
    add, ln = rows["aten::add"], rows["aten::native_layer_norm"]
    assert add.bytes == 2 * ADD_BYTES and ln.bytes == 2 * (LN_READS + LN_WRITES)
    # the add reads 2 of its 3 buffers: the 2 : 1 pass, not the copy (nor the unknown mix's)
    assert add.memory_roof == "dram" and add.bound == "memory"
    assert add.attainable_ms == pytest.approx(add.bytes / 1.25e12 * 1e3, rel=1e-12)
    assert add.achieved_bandwidth_fraction == pytest.approx(ADD_BYTES / 0.6e-3 / 1.25e12)
    # the LayerNorm writes a little more than it reads: just above the copy rate, where the
    # unknown mix would give it the add's 1.25 TB/s
    assert LN_SHARE == pytest.approx(0.49957, abs=1e-5)
    assert LN_RATE == pytest.approx(1.00043e12, rel=1e-5)
    assert ln.attainable_ms == pytest.approx(ln.bytes / LN_RATE * 1e3, rel=1e-12)
    assert ln.achieved_bandwidth_fraction == pytest.approx(ln.bytes / 0.3e-3 / LN_RATE)


def test_op_rows_use_the_reads_where_a_slow_add_pass_is_not_used(ceilings):
    """With the 2 : 1 pass measured below the copy, the add is on the line from the copy to
    the sum (1 + 0.6 / 3 = 1.2 TB/s at 2/3 read); an op row placed without its reads would
    have the unknown mix's rate, the copy's 1 TB/s."""
    from support.analysis import run

    slow_mix = _mixed(ceilings, read_mix_bandwidth=0.9e12, read_bandwidth=1.6e12)
    add = next(r for r in run("synthetic_memory_block", slow_mix).ops if r.name == "aten::add")
    assert add.attainable_ms == pytest.approx(add.bytes / 1.2e12 * 1e3, rel=1e-12)


def test_memory_findings_hold_each_call_to_the_roof_its_row_was_placed_on(
    mix_ceilings, monkeypatch
):
    """memory-bound-op (the add's time above its roof), unfused-chain (the add's output
    written and read back, at the add's rate) and fp32-storage (half of the bytes left, each
    call's at its own rate: the LayerNorm's at LN_RATE, not the unknown mix's)."""
    from support.analysis import by_code, run

    monkeypatch.setattr("membound.analysis.findings.MIN_SHARE", 0.0)  # fp32-storage: 0.9%
    found = by_code(run("synthetic_memory_block", mix_ceilings))
    mb = found["memory-bound-op"]
    assert mb.evidence["op"] == "aten::add" and mb.evidence["memory_roof"] == "dram"
    assert mb.time_lost_ms_per_step == pytest.approx(0.6 - ADD_BYTES / 1.25e12 * 1e3)
    assert found["unfused-chain"].time_lost_ms_per_step == pytest.approx(CHAINED / 1.25e12 * 1e3)
    left = (ADD_BYTES - CHAINED) / 1.25e12 + (LN_READS + LN_WRITES) / LN_RATE
    assert found["fp32-storage"].time_lost_ms_per_step == pytest.approx(0.5 * left * 1e3)


def test_the_recorded_h200_ceilings_place_a_real_trace_as_before():
    """tests/fixtures/h200_ceilings_l2.json has no 2 : 1 pass: every op held to HBM is at
    the 4.28 TB/s copy rate, though its fill (4.67 TB/s) is faster and GPT-2's LayerNorm
    forward writes a little more than it reads. With an add pass measured (4.4 TB/s, a test
    value), its backward (dy and x read, dx written, at least 2 of 3 bytes read) is held to
    it; its sum pass (4.19 TB/s) is below the copy and not used."""
    c = Ceilings.load(FIXTURES / "h200_ceilings_l2.json")
    assert c.read_mix_bandwidth is None and c.write_bandwidth > c.memory_bandwidth
    assert c.read_bandwidth < c.memory_bandwidth
    trace = [timeline_in(FIXTURES / "h200_real_gpt2")]
    rows = {r.name: r for r in analyze(trace, c).ops}
    held = [r for r in rows.values() if r.bound == "memory" and r.memory_roof == "dram"]
    assert len(held) >= 5
    for r in held:
        assert r.attainable_ms == r.bytes / c.memory_bandwidth * 1e3, r.name
    mixed = {r.name: r for r in analyze(trace, _mixed(c, read_mix_bandwidth=4.4e12)).ops}
    bwd = mixed["aten::native_layer_norm_backward"]
    assert bwd.memory_roof == "dram"
    assert bwd.attainable_ms == pytest.approx(bwd.bytes / 4.4e12 * 1e3, rel=1e-12)
