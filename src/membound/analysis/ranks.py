"""Merge the analyses of one trace per rank: per-rank step time and GPU busy, stragglers,
and communication that is exposed once waiting for stragglers is taken out.

Method (what the numbers mean):

- Each rank's trace is analysed on its own (in parallel processes), as `membound analyze`
  would; steps are matched across ranks by their `ProfilerStep#N` number, and a collective
  belongs to the step that issued it (its launch in the step's host window; see
  `membound.analysis.collectives`).
- **The same collective on every rank**: by (process group, `Seq`) when every collective
  carries a sequence number, else the j-th collective of a process group issued in step N.
  torch 2.11 records no `Seq` (checked on 2xH200 traces), so the second rule is what real
  traces use; it holds because every rank issues the same collectives in the same order.
- **Waiting for peers.** A collective ends on every rank at about the same moment (nobody
  leaves before the last rank arrives), so a rank that arrived early shows a longer
  collective. For the j-th collective of step N on every rank, the last rank to arrive is
  the one with the shortest collective, and rank r waited `dur_r − min over ranks of dur`.
  This uses durations only, so it needs no clock agreement between hosts. Collectives are
  NCCL kernels on GPU traces, `gloo:*` host spans on CPU-only ones.
- **Compute time** of a rank in a step = its step wall time − its waiting. The straggler(s)
  are the rank(s) whose compute time exceeds the other ranks' median by more than
  `STRAGGLER_SHARE` of a step (and `STRAGGLER_MIN_MS`) in **more than half of the compared
  steps**; **held back** = the median over steps of that excess: the time every other rank
  spends waiting for it. A straggler is late step after step; a rank that is late by a
  millisecond in two steps of four and early in the others is jitter (seen on 2xH200: the
  DDP ranks of one healthy run took turns being late; the median of their four excesses
  alone crossed 5%). Without any collective (no DDP), compute time is the step wall time
  and the same rule applies to step times.
- **Exposed communication** (merged) = per collective, its NCCL time with no compute beside
  it, capped at its time after the last rank arrived (`dur − wait`): the waiting is the
  straggler's, not the network's.
- **Bus bandwidth** of a collective = its bytes ÷ the last-arriving rank's kernel time (the
  closest a trace gets to the transfer time) × nccl-tests' factor (2(n−1)/n for all-reduce).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from membound.analysis import intervals as iv
from membound.analysis.clean import clean_trace
from membound.analysis.collectives import Collective, bus_bandwidth, ceiling_fields, collectives
from membound.analysis.findings import run_rank_rules
from membound.analysis.pipeline import analyze_trace, merge
from membound.analysis.result import Analysis
from membound.device.lookup import interconnect_for
from membound.errors import BadInput
from membound.trace.capture_meta import read_meta
from membound.trace.distributed import rank_of_path, read_distributed_info
from membound.trace.load import load_trace

#: a rank whose compute time exceeds the others' median by more than this share of a step
#: (and by STRAGGLER_MIN_MS) is a straggler
STRAGGLER_SHARE = 0.05
STRAGGLER_MIN_MS = 0.05
#: rank traces from this size are analysed one after the other: the loader already spreads
#: one big file over worker processes (see membound.trace.load)
_PARALLEL_MAX_BYTES = 256 << 20


@dataclass
class RankResult:
    """One rank's own analysis and collectives (what a worker process returns)."""

    rank: int
    path: str
    analysis: Analysis
    collectives: list[Collective]
    world_size: int | None = None
    backend: str | None = None


@dataclass
class RankRow:
    rank: int
    trace: str
    steps: int
    median_step_ms: float
    mean_step_ms: float
    gpu_busy_fraction: float | None
    compute_ms_per_step: float  # step wall − waiting for peers
    wait_ms_per_step: float  # inside collectives, waiting for a later rank
    comm_ms_per_step: float  # collective time (NCCL kernels or gloo spans)
    exposed_comm_ms_per_step: float  # NCCL time with no compute beside it, waits removed
    collectives_per_step: float
    late_fraction: float  # share of matched collectives this rank arrived last to


@dataclass
class Straggler:
    rank: int
    held_back_ms_per_step: float
    share_of_step: float
    others_wait_ms_per_step: float  # median over the other ranks of their waiting
    late_fraction: float
    method: str  # "collective waits" | "step times"


@dataclass
class RankContext:
    """What a cross-rank rule reads (`analysis.findings.rank_rule`)."""

    merged: Analysis  # the ranks' steps and findings pooled
    ranks: list[RankRow]
    stragglers: list[Straggler]
    collectives: list[dict]  # per collective kind across ranks (`_collective_rows`)
    interconnect_source: str | None


@dataclass
class RankedAnalysis:
    ranks: list[RankRow]
    stragglers: list[Straggler]
    collectives: list[dict]
    merged: Analysis  # all ranks' steps pooled, with the cross-rank findings added
    world_size: int
    backend: str | None = None
    interconnect: dict | None = None
    interconnect_source: str | None = None
    matched_steps: int = 0
    notes: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------ discovery
def rank_of(path: str | os.PathLike) -> tuple[int | None, int | None, str | None]:
    """(rank, world size, backend) a trace declares: its `distributedInfo`, else its name."""
    info = read_distributed_info(path) or {}
    rank = info.get("rank")
    world = info.get("world_size")
    if not isinstance(rank, int):
        rank = rank_of_path(path)
    return rank, world if isinstance(world, int) else None, info.get("backend")


def is_rank_set(paths: Sequence[str | os.PathLike]) -> bool:
    """Whether these traces are the ranks of one distributed run (2+ files, each with a
    distinct rank from its distributedInfo or its name)."""
    if len(paths) < 2:
        return False
    ranks = [rank_of(p)[0] for p in paths]
    return all(r is not None for r in ranks) and len(set(ranks)) == len(ranks)


# ------------------------------------------------------------------------------- analysis
def _analyze_one(path: str, ceilings: Any, fallback_rank: int) -> RankResult:
    trace = load_trace(path)
    analysis = analyze_trace(trace, ceilings, read_meta(path))
    # the collectives read the events the analysis kept (it cleans its own copy)
    cols = collectives(clean_trace(trace).trace, analysis.steps)
    rank, world, backend = rank_of(path)
    return RankResult(
        rank if rank is not None else fallback_rank, str(path), analysis, cols, world, backend
    )


def analyze_ranks(
    paths: Sequence[str | os.PathLike], ceilings: Any = None, workers: int | None = None
) -> RankedAnalysis:
    """Analyze one trace per rank (in parallel processes) and merge them."""
    paths = [str(p) for p in paths]
    if not paths:
        raise BadInput("no rank traces given; pass trace.rank*.json.gz files or their folder.")
    small = all(Path(p).stat().st_size < _PARALLEL_MAX_BYTES for p in paths if Path(p).exists())
    n = workers if workers is not None else min(len(paths), os.cpu_count() or 1, 8)
    if n > 1 and small and len(paths) > 1:
        results = _parallel(paths, ceilings, n)
    else:
        results = [_analyze_one(p, ceilings, i) for i, p in enumerate(paths)]
    return merge_ranks(results)


def _parallel(paths: list[str], ceilings: Any, n: int) -> list[RankResult]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    # fork where possible (no re-import of the caller's __main__; workers never touch CUDA),
    # but not from a process with a CUDA context or NCCL threads (rank 0 after its run)
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        method = "spawn"
    try:
        with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context(method)) as pool:
            futures = [pool.submit(_analyze_one, p, ceilings, i) for i, p in enumerate(paths)]
            return [f.result() for f in futures]
    except (BrokenProcessPool, OSError):  # no processes here (sandbox, killed worker)
        return [_analyze_one(p, ceilings, i) for i, p in enumerate(paths)]


def merge_ranks(results: list[RankResult]) -> RankedAnalysis:
    """The cross-rank view of per-rank results (pure: tests call it directly)."""
    results = sorted(results, key=lambda r: r.rank)
    seen = [r.rank for r in results]
    if len(set(seen)) != len(seen):
        dup = sorted({r for r in seen if seen.count(r) > 1})
        raise BadInput(
            f"several traces claim rank {dup[0]}; pass the traces of one run only "
            "(one file per rank)."
        )
    notes: list[str] = []
    world = max([r.world_size or 0 for r in results] + [len(results)])
    if world > len(results):
        notes.append(f"{len(results)} of {world} ranks' traces given: the others are not compared")
    common = _common_steps(results)
    if not common:
        notes.append("the ranks share no step number: steps are not compared across ranks")
    groups = match_collectives(results, common)
    waits, walls, late, matched = _waits(results, common, groups)
    compute = {r.rank: walls[r.rank] - waits[r.rank] for r in results}
    rows = [_row(r, common, waits, compute, late, matched) for r in results]
    method = "collective waits" if matched.sum() > 0 else "step times"
    if common and method == "step times":
        notes.append("no collective was matched across ranks: stragglers judged from step times")
    stragglers = _stragglers(results, compute, waits, late, matched, method)
    for r in results:  # pooled steps keep saying whose they are
        for s in r.analysis.steps:
            s.rank = r.rank
    merged = merge([r.analysis for r in results]) if len(results) > 1 else results[0].analysis
    merged = dataclasses.replace(merged, findings=list(merged.findings), notes=list(merged.notes))
    ceiling, source = interconnect_for(merged.ceilings, merged.device_name)
    coll_rows = _collective_rows(groups, common, world, ceiling)
    notes += _ceiling_notes(coll_rows)
    merged.findings = run_rank_rules(
        RankContext(merged, rows, stragglers, coll_rows, source), merged.findings
    )
    backend = next((r.backend for r in results if r.backend), None)
    return RankedAnalysis(
        ranks=rows,
        stragglers=stragglers,
        collectives=coll_rows,
        merged=merged,
        world_size=world,
        backend=backend,
        interconnect=ceiling.to_dict() if ceiling is not None else None,
        interconnect_source=source,
        matched_steps=len(common),
        notes=notes,
    )


def _common_steps(results: list[RankResult]) -> list[int]:
    sets = [{s.index for s in r.analysis.steps} for r in results]
    return sorted(set.intersection(*sets)) if sets else []


def _step_index(r: RankResult) -> dict[int, int]:
    return {i: s.index for i, s in enumerate(r.analysis.steps)}


def match_collectives(results: list[RankResult], common: list[int]) -> list[dict[int, Collective]]:
    """The same collective on every rank: by (process group, sequence number) when every
    collective carries one, else the j-th collective of a process group issued in step N
    on each rank (issue order: the ranks' GPUs may lag their hosts by different amounts).
    Only collectives in the common steps count."""
    keep = set(common)
    per: list[tuple[int, list[Collective]]] = []
    for r in results:
        idx = _step_index(r)
        cols = [c for c in r.collectives if c.step >= 0 and idx[c.step] in keep]
        per.append((r.rank, sorted(cols, key=_issue_order)))
    by_seq = all(c.seq is not None for _, cols in per for c in cols)
    keyed: list[dict] = []
    for (_, cols), r in zip(per, results, strict=True):
        idx = _step_index(r)
        if by_seq:
            keyed.append({(c.process_group, c.seq): c for c in cols})
        else:
            count: dict[tuple, int] = {}
            d = {}
            for c in cols:
                key = (idx[c.step], c.process_group)
                d[(*key, count.get(key, 0))] = c
                count[key] = count.get(key, 0) + 1
            keyed.append(d)
    if not keyed:
        return []
    shared = set.intersection(*(set(k) for k in keyed))
    groups = [{r.rank: k[key] for r, k in zip(results, keyed, strict=True)} for key in shared]
    groups.sort(key=lambda g: min(c.start_us for c in g.values()))
    return groups


def _issue_order(c: Collective) -> tuple[float, float]:
    return (c.issued_us if c.issued_us is not None else c.start_us, c.start_us)


def _waits(results: list[RankResult], common: list[int], groups):
    """Per rank: per common step, waiting ms and wall ms; per rank, matched collectives it
    arrived last to; per common step (the first rank's), how many collectives matched."""
    n = len(common)
    pos = {idx: k for k, idx in enumerate(common)}
    walls, waits = {}, {r.rank: np.zeros(n) for r in results}
    late = {r.rank: 0 for r in results}
    matched = np.zeros(n, dtype=int)
    steps = {r.rank: _step_index(r) for r in results}
    for r in results:
        # the host's step windows: waits are matched by issue (host) time, and the cross-rank
        # comparison was validated on 2xH200 with them (the GPU-clock windows of a rank whose
        # host runs ahead are not, until a multi-GPU machine checks them: issue 19)
        wall_of = {s.index: s.host_wall_ms for s in r.analysis.steps}
        walls[r.rank] = np.array([wall_of[i] for i in common], dtype=float)
    spans: dict[tuple[int, int], list[tuple[float, float]]] = {}
    first = results[0].rank
    for g in groups:
        last = min(g, key=lambda rank: g[rank].dur_us)
        late[last] += 1
        matched[pos[steps[first][g[first].step]]] += 1
        for rank, c in g.items():
            c.wait_us = c.dur_us - g[last].dur_us
            k = pos[steps[rank][c.step]]
            spans.setdefault((rank, k), []).append((c.start_us, c.start_us + c.wait_us))
    for (rank, k), sp in spans.items():
        # host-side collectives (gloo) run concurrently and queue behind each other:
        # the union of the waits, so overlapping ones are not counted twice
        starts = np.array([a for a, _ in sp])
        ends = np.array([b for _, b in sp])
        waits[rank][k] = iv.total(iv.union(starts, ends)) / 1e3
    return waits, walls, late, matched


def _row(r: RankResult, common, waits, compute, late, matched) -> RankRow:
    a = r.analysis
    n = max(len(common), 1)
    cols = [c for c in r.collectives if c.step >= 0]
    steps_n = max(len(a.steps), 1)
    # the waiting is the kernel's first `wait_us`; only its transfer part can be exposed
    exposed_net = sum(max(min(c.exposed_us, c.dur_us - c.wait_us), 0.0) for c in cols)
    total_matched = int(matched.sum())
    return RankRow(
        rank=r.rank,
        trace=r.path,
        steps=len(a.steps),
        median_step_ms=a.median_step_ms,
        mean_step_ms=a.mean_step_ms,
        gpu_busy_fraction=a.gpu_busy_fraction,
        compute_ms_per_step=float(compute[r.rank].sum()) / n if common else a.mean_step_ms,
        wait_ms_per_step=float(waits[r.rank].sum()) / n if common else 0.0,
        comm_ms_per_step=sum(c.dur_us for c in cols) / 1e3 / steps_n,
        exposed_comm_ms_per_step=exposed_net / 1e3 / steps_n,
        collectives_per_step=len(cols) / steps_n,
        late_fraction=late[r.rank] / total_matched if total_matched else 0.0,
    )


def _stragglers(results, compute, waits, late, matched, method) -> list[Straggler]:
    if len(results) < 2 or not len(next(iter(compute.values()))):
        return []
    ranks = sorted(compute)
    table = np.vstack([compute[r] for r in ranks])  # rank × step
    typical = {r: float(np.median(compute[r])) for r in ranks}
    top = max(typical, key=typical.get)
    others_of_top = np.array([r != top for r in ranks])
    # per step, the others' median compute time: one noisy step or rank does not make a
    # straggler, and the verdict is the median over steps of each rank's excess over it
    baseline = np.median(table[others_of_top], axis=0)
    step_ms = float(np.median([np.median(compute[r] + waits[r]) for r in ranks]))
    total = int(matched.sum())
    out = []
    for i, rank in sorted(enumerate(ranks), key=lambda kv: -typical[kv[1]]):
        excesses = table[i] - baseline
        excess = float(np.median(excesses))
        bar = max(STRAGGLER_SHARE * step_ms, STRAGGLER_MIN_MS)
        if excess <= bar or 2 * int((excesses > bar).sum()) <= len(excesses):
            continue
        others = [float(np.median(waits[k])) for k in ranks if k != rank]
        out.append(
            Straggler(
                rank=rank,
                held_back_ms_per_step=excess,
                share_of_step=excess / step_ms if step_ms > 0 else 0.0,
                others_wait_ms_per_step=float(np.median(others)) if others else 0.0,
                late_fraction=late[rank] / total if total else 0.0,
                method=method,
            )
        )
    return out


def _collective_rows(groups, common, world, ceiling) -> list[dict]:
    """Per collective kind across ranks: bus bandwidth from the last arriver's time (median
    over calls), against the all-reduce ceiling measured at the smallest size at or above
    the median call's bytes (`Interconnect.allreduce_ceiling`)."""
    by_kind: dict[str, dict[str, list]] = {}
    for g in groups:
        group = list(g.values())
        d = by_kind.setdefault(group[0].kind, {"bw": [], "ms": [], "bytes": [], "calls": []})
        fastest = min(c.dur_us for c in group)
        sized = next((c for c in group if c.bytes), None)
        d["calls"].append(1)
        d["ms"].append(fastest / 1e3)
        if sized is not None:
            d["bytes"].append(sized.bytes)
            bw = bus_bandwidth(sized, sized.group_size or world, fastest)
            if bw:
                d["bw"].append(bw)
    rows = []
    for kind, d in sorted(by_kind.items()):
        bw = float(np.median(d["bw"])) if d["bw"] else None
        nbytes = float(np.median(d["bytes"])) if d["bytes"] else None
        rows.append(
            {
                "collective": kind,
                "calls_per_step": len(d["calls"]) / max(len(common), 1),
                "bytes_per_call": nbytes,
                "transfer_ms": float(np.median(d["ms"])),
                "bus_bandwidth_gbs": bw / 1e9 if bw else None,
                **ceiling_fields(ceiling, nbytes, bw),
            }
        )
    return rows


def _ceiling_notes(coll_rows: list[dict]) -> list[str]:
    """Say so when a collective is larger than every all-reduce size the ceiling was
    measured at: bus bandwidth grows with the message, so its fraction may exceed 1."""
    out = []
    for row in coll_rows:
        size, at = row.get("bytes_per_call"), row.get("ceiling_bytes")
        if size and at and at < size:
            out.append(
                f"{row['collective']} moves {size / 2**20:.0f} MiB per call but the GPU<->GPU "
                f"ceiling was measured with at most {at / 2**20:.0f} MiB; NCCL's bus bandwidth "
                "grows with the message, so its fraction of that ceiling may exceed 1: "
                "re-measure with `membound roofline` (all-reduces of 4 to 256 MiB)"
            )
    return out
