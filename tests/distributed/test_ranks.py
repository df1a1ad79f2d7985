"""Merged multi-rank analysis on synthetic traces with planted stragglers and all-reduces
(expected numbers derived in multirank.py)."""

from __future__ import annotations

import pytest

from membound.analysis import analyze
from membound.analysis.ranks import analyze_ranks, is_rank_set, merge_ranks
from membound.device import cache, interconnect
from membound.device.ceilings import Ceilings
from membound.errors import BadInput
from support import multirank


def _codes(ra):
    return [f.code for f in ra.merged.findings]


@pytest.mark.parametrize("workers", [1, 2])
def test_planted_straggler_two_ranks(tmp_path, workers):
    paths = multirank.write_ranks(tmp_path, multirank.straggler)
    ra = analyze_ranks(paths, workers=workers)
    assert [s.rank for s in ra.stragglers] == [1]
    s = ra.stragglers[0]
    assert s.held_back_ms_per_step == pytest.approx(3.0, abs=1e-6)
    assert s.share_of_step == pytest.approx(0.3, abs=1e-6)
    assert s.others_wait_ms_per_step == pytest.approx(3.0, abs=1e-6)
    assert s.late_fraction == 1.0 and s.method == "collective waits"
    r0, r1 = ra.ranks
    assert (r0.rank, r1.rank) == (0, 1)
    assert r0.wait_ms_per_step == pytest.approx(3.0) and r1.wait_ms_per_step == pytest.approx(0.0)
    assert r0.compute_ms_per_step == pytest.approx(7.0) and r1.compute_ms_per_step == pytest.approx(
        10.0
    )
    assert r0.median_step_ms == pytest.approx(10.0) and ra.matched_steps == 3
    # raw NCCL time is 3.4 vs 0.4 ms; net of waiting both ranks expose 0.4 ms
    assert r0.comm_ms_per_step == pytest.approx(3.4) and r1.comm_ms_per_step == pytest.approx(0.4)
    assert r0.exposed_comm_ms_per_step == pytest.approx(0.4)
    assert r1.exposed_comm_ms_per_step == pytest.approx(0.4)
    assert _codes(ra)[:2] == ["straggler-rank", "exposed-communication"]
    exp = ra.merged.findings[1]
    assert exp.time_lost_ms_per_step == pytest.approx(0.4)
    assert exp.evidence["waiting_for_late_ranks_ms_per_step"] == pytest.approx(1.5)
    (ar,) = ra.collectives
    # 100 MB in the last arriver's 0.4 ms, × 2(n−1)/n = 1 for two ranks
    assert ar["collective"] == "allreduce" and ar["bytes_per_call"] == 100e6
    assert ar["bus_bandwidth_gbs"] == pytest.approx(250.0)
    assert ar["transfer_ms"] == pytest.approx(0.4)


def test_planted_straggler_four_ranks(tmp_path):
    paths = multirank.write_ranks(tmp_path, multirank.straggler, world=4, late=2, sleep=2000.0)
    ra = analyze_ranks(paths, workers=1)
    assert [s.rank for s in ra.stragglers] == [2]
    assert ra.stragglers[0].held_back_ms_per_step == pytest.approx(2.0)
    assert [r.wait_ms_per_step for r in ra.ranks] == pytest.approx([2.0, 2.0, 0.0, 2.0])
    # last arriver's all-reduce 1.4 ms: 100 MB / 1.4 ms × 2·3/4
    assert ra.collectives[0]["bus_bandwidth_gbs"] == pytest.approx(100e6 / 1.4e-3 * 1.5 / 1e9)
    assert ra.world_size == 4 and ra.backend == "nccl"


def test_exposed_allreduce_against_cached_ceiling(tmp_path, ceilings):
    # the ceilings passed in have no GPU<->GPU figures; a cached measurement of this GPU has
    ic = interconnect.Interconnect(name="NVIDIA H200", gpus=2, allreduce_bus_bandwidth=400e9 / 3)
    cached = Ceilings(device="cuda", name=ic.name, memory_bandwidth=4e12, interconnect=ic.to_dict())
    cached.key = {"name": ic.name, "gpus": 2}
    cache.save(cached)
    assert ceilings.interconnect is None
    paths = multirank.write_ranks(tmp_path, multirank.exposed, jitter=20.0)
    ra = analyze_ranks(paths, ceilings, workers=1)
    assert ra.stragglers == []  # 20 µs of jitter is noise, not a straggler
    top = ra.merged.findings[0]
    assert top.code == "exposed-communication"
    # rank 0 exposes 5.5 ms + 20 µs of which 20 µs waiting: net 5.5 on both ranks
    assert top.time_lost_ms_per_step == pytest.approx(5.5)
    assert top.share_of_step == pytest.approx(0.55)
    (ar,) = ra.collectives
    assert ar["bus_bandwidth_gbs"] == pytest.approx(400e6 / 6e-3 / 1e9)
    assert ar["ceiling_gbs"] == pytest.approx(400 / 3)
    assert ar["fraction_of_ceiling"] == pytest.approx(0.5)
    assert ra.interconnect_source == "ceilings cache"


def test_ceiling_from_ceilings_object(tmp_path, ceilings):
    ceilings.interconnect = {"allreduce_bus_bandwidth": 100e9, "name": "NVIDIA H200", "gpus": 2}
    paths = multirank.write_ranks(tmp_path, multirank.exposed)
    ra = analyze_ranks(paths, ceilings=ceilings, workers=1)
    assert ra.interconnect_source == "ceilings"
    assert ra.collectives[0]["fraction_of_ceiling"] == pytest.approx(400e6 / 6e-3 / 100e9)


def test_single_rank_rule_counts_waiting_as_exposed(tmp_path, ceilings):
    paths = multirank.write_ranks(tmp_path, multirank.straggler)
    a0 = analyze(paths[0], ceilings)
    f = next(f for f in a0.findings if f.code == "exposed-communication")
    assert f.time_lost_ms_per_step == pytest.approx(3.4)
    ev = f.evidence
    assert ev["communication_ms_per_step"] == pytest.approx(3.4)
    (row,) = ev["collectives"]
    assert row["bytes_per_call"] == 100e6
    assert row["bus_bandwidth_gbs"] == pytest.approx(100e6 / 3.4e-3 / 1e9)  # a lower bound
    exposed = analyze(multirank.write_ranks(tmp_path / "e", multirank.exposed)[0], ceilings)
    f = next(f for f in exposed.findings if f.code == "exposed-communication")
    assert f.time_lost_ms_per_step == pytest.approx(5.5)
    assert f.evidence["overlapped_fraction"] == pytest.approx(0.5 / 6)
    assert len(f.spans) == 3


def test_no_collectives_judges_step_times(tmp_path):
    """Unsynchronised ranks (no DDP): rank 1's steps take 14 ms instead of 10."""
    from support.tracebuilder import TraceBuilder

    paths = []
    for r, step in ((0, 10_000.0), (1, 14_000.0)):
        b = multirank.RankTraceBuilder(r, 2)
        for s in range(3):
            b.step(s, s * step, step)
            b.launch("k", s * step + 5, s * step + 10, 5000.0)
        paths.append(b.write(tmp_path / f"trace.rank{r}.json.gz"))
    assert isinstance(b, TraceBuilder)
    ra = analyze_ranks(paths, workers=1)
    (s,) = ra.stragglers
    assert (s.rank, s.method) == (1, "step times")
    assert s.held_back_ms_per_step == pytest.approx(4.0)
    assert any("step times" in n for n in ra.notes)


def test_rank_set_detection_and_duplicates(tmp_path):
    paths = multirank.write_ranks(tmp_path / "a", multirank.exposed)
    assert is_rank_set(paths)
    assert not is_rank_set(paths[:1])
    dup = multirank.exposed(0, 2).write(tmp_path / "other.json.gz")  # also claims rank 0
    assert not is_rank_set([paths[0], dup])
    from membound.analysis.ranks import _analyze_one

    results = [_analyze_one(str(p), None, i) for i, p in enumerate([paths[0], dup])]
    with pytest.raises(BadInput, match="rank 0"):
        merge_ranks(results)


def test_missing_rank_is_noted(tmp_path):
    paths = multirank.write_ranks(tmp_path, multirank.exposed, world=4)
    ra = analyze_ranks(paths[:2], workers=1)
    assert ra.world_size == 4
    assert any("2 of 4 ranks" in n for n in ra.notes)


def test_cpu_gloo_overlapping_waits_counted_once(tmp_path):
    """CPU-only (gloo) ranks: two all-reduces per step queue in gloo's worker thread, so
    their spans overlap. Rank 0 submits at 1.0 and 1.1 ms, rank 1 at 5.0 and 5.1 ms; both end
    at 6.0 / 6.5 ms. Rank 0 waits 4 ms in each, but the union is 4.1 ms, not 8."""
    paths = []
    for r, first in ((0, 1000.0), (1, 5000.0)):
        b = multirank.RankTraceBuilder(r, 2, backend="gloo", device=None)
        for s in range(3):
            o = s * 10_000.0
            b.step(s, o, 10_000.0)
            b.op("aten::mm", o + 10, first - 20)
            b.gloo_allreduce(o + first, 6000.0 - first)
            b.gloo_allreduce(o + first + 100, 6400.0 - first)
        paths.append(b.write(tmp_path / f"trace.rank{r}.json.gz"))
    ra = analyze_ranks(paths, workers=1)
    r0, r1 = ra.ranks
    assert r0.gpu_busy_fraction is None and r0.collectives_per_step == 2
    assert r0.wait_ms_per_step == pytest.approx(4.1) and r1.wait_ms_per_step == 0.0
    (s,) = ra.stragglers
    assert s.rank == 1 and s.held_back_ms_per_step == pytest.approx(4.1)
    assert s.late_fraction == 1.0 and ra.backend == "gloo"
    assert ra.collectives[0]["bus_bandwidth_gbs"] is None  # gloo records no sizes


def test_collectives_matched_by_sequence_number(tmp_path):
    """Rank 0's GPU lags its host by a step, so its all-reduce #s runs inside step s+1 (the
    last one still counts: the last step runs until the GPU work launched in it ends).
    Matching by Seq pairs the true partners: rank 0 waits (3.0−0.4) + (1.0−0.2) + (2.0−0.3)
    = 5.1 ms in all; the j-th-in-step pairing would say (3.0−0.2) + (1.0−0.3) = 3.5."""
    durs = {0: [3000.0, 1000.0, 2000.0], 1: [400.0, 200.0, 300.0]}
    paths = []
    for r in (0, 1):
        b = multirank.RankTraceBuilder(r, 2)
        for s in range(3):
            o = s * multirank.STEP
            b.step(s, o, multirank.STEP)
            gpu = o + 1000 + (multirank.STEP if r == 0 else 0.0)
            b.allreduce(o + 100, gpu, durs[r][s], 1_000_000, seq=s + 1)
        paths.append(b.write(tmp_path / f"trace.rank{r}.json.gz"))
    ra = analyze_ranks(paths, workers=1)
    r0, r1 = ra.ranks
    assert r0.wait_ms_per_step * 3 == pytest.approx(5.1)
    assert r1.wait_ms_per_step == 0.0
    (ar,) = ra.collectives
    assert ar["calls_per_step"] == pytest.approx(1.0)
    # median over the three all-reduces of 4 MB / last arriver's time (0.4, 0.2, 0.3 ms)
    assert ar["bus_bandwidth_gbs"] == pytest.approx(4e6 / 0.3e-3 / 1e9)
