"""The ops behind the kernels a CUDA graph replays, from the graph's capture (issue 16).

A replay is one `cudaGraphLaunch`; every kernel it runs carries that call's correlation id
and nothing else: no op, no shapes. membound's capture records each CUDA-graph capture that
happens before its timeline pass with CPU ops and shapes (`trace.capture<N>.json.gz`,
`trace.graph_hooks`). Inside a capture nothing runs: each launch call is recorded with the op
around it, and no kernel has its correlation id (the few that do ran outside the graph).
Those launches, in order, are the graph's kernels. On the H200
(2026-12-03): examples/planted/launch_bound_graphed.py recorded 293 launches in its capture,
2 of which ran (outside the graph), and each replay ran 291 kernels; compiled GPT-2 with
`mode="reduce-overhead"` captured graphs of 200 and 442 launches, replayed as 200 and 442
kernels.

`attach` gives every replay whose kernel count equals a capture's (and whose Triton kernels,
where the capture names them by their op, have the same names in the same order) a copy of
that capture's ops on a thread of its own, shifted to the replay's launch, and points the
i-th replayed kernel at the i-th captured launch. The op join (`analysis.ops`) then costs
replayed kernels as it costs launched ones. A replay that no capture matches stays as it
was: uncosted, and counted as replayed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from membound.trace.model import CPU_OP, GRAPH_LAUNCH, KERNEL, LAUNCH, NO_ROLE, Table, Trace

#: threads of the copied ops start here (one per replay): far above any OS thread id
SYNTHETIC_TID = 1 << 48


@dataclass
class Captured:
    """One capture's graph: its launches in order, with the ops to copy for them."""

    trace: Trace
    launches: np.ndarray  # runtime rows of the captured launches, in launch order
    ops: np.ndarray  # CPU op rows around them (same threads, overlapping their span)
    start: float  # ts of the first captured launch
    #: per launch, the name of its innermost op when it is a Triton kernel's ("triton_*"),
    #: else None: what a replay's kernel names are checked against
    triton_names: list[str | None]

    @property
    def size(self) -> int:
        return len(self.launches)


def captured(trace: Trace) -> Captured | None:
    """The graph one capture trace holds, None when it captured no launch."""
    rt, cpu = trace.runtime, trace.cpu
    ran = np.isin(rt.correlation, trace.gpu.correlation)
    launches = np.flatnonzero((rt.call == LAUNCH) & ~ran)
    if not len(launches):
        return None
    launches = launches[np.argsort(rt.ts[launches], kind="stable")]
    start = float(rt.ts[launches].min())
    stop = float((rt.ts[launches] + rt.dur[launches]).max())
    tids = np.unique(rt.tid[launches])
    ops = np.flatnonzero(
        (cpu.kind == CPU_OP)
        & np.isin(cpu.tid, tids)
        & (cpu.ts <= stop)
        & (cpu.ts + cpu.dur >= start)
    )
    names = [_innermost_name(trace, ops, int(i)) for i in launches.tolist()]
    triton = [n if n is not None and n.startswith("triton_") else None for n in names]
    return Captured(trace, launches, ops, start, triton)


def _innermost_name(trace: Trace, ops: np.ndarray, launch: int) -> str | None:
    """The name of the latest-starting op of `ops` around runtime row `launch`."""
    rt, cpu = trace.runtime, trace.cpu
    t, tid = rt.ts[launch], rt.tid[launch]
    around = ops[(cpu.tid[ops] == tid) & (cpu.ts[ops] <= t) & (cpu.ts[ops] + cpu.dur[ops] > t)]
    if not len(around):
        return None
    return trace.names[int(cpu.name[around[np.argmax(cpu.ts[around])]])]


@dataclass
class AttachStats:
    replays: int = 0  # graph launches with kernels in the trace
    matched: int = 0  # of them, given a capture's ops
    kernels: int = 0  # replayed kernels given an op

    def note(self) -> str | None:
        if not self.replays:
            return None
        missed = self.replays - self.matched
        text = (
            f"{self.matched} of {self.replays} CUDA-graph replays costed from their captures "
            f"({self.kernels} kernels given the ops that launched them while captured)"
        )
        if missed:
            text += f"; {missed} matched no recorded capture and stay uncosted"
        return text


def attach(trace: Trace, captures: list[Trace]) -> tuple[Trace, AttachStats]:
    """`trace` with the ops of its CUDA-graph replays copied from `captures` (see the module
    docstring), and what was matched. `trace` itself is not changed."""
    stats = AttachStats()
    rt, gpu = trace.runtime, trace.gpu
    graph_calls = np.flatnonzero(rt.call == GRAPH_LAUNCH)
    if not len(graph_calls):
        return trace, stats
    graphs = [c for c in (captured(t) for t in captures) if c is not None]
    # the replayed kernels, grouped by their graph launch's correlation id, in start order
    replayed = np.flatnonzero(
        (gpu.kind == KERNEL) & np.isin(gpu.correlation, rt.correlation[graph_calls])
    )
    replayed = replayed[np.lexsort((gpu.ts[replayed], gpu.correlation[replayed]))]
    corr, first = np.unique(gpu.correlation[replayed], return_index=True)
    groups = dict(zip(corr.tolist(), np.split(replayed, first[1:]), strict=False))
    new = _Builder(trace)
    for call in graph_calls.tolist():
        ks = groups.get(int(rt.correlation[call]))
        if ks is None:
            continue
        stats.replays += 1
        names = [trace.names[int(n)] for n in gpu.name[ks].tolist()]
        graph = _match(graphs, names)
        if graph is None:
            continue
        stats.matched += 1
        stats.kernels += len(ks)
        new.add_replay(graph, call, ks)
    return (new.build(), stats) if stats.matched else (trace, stats)


def _match(graphs: list[Captured], kernel_names: list[str]) -> Captured | None:
    """The first capture with as many launches as the replay has kernels whose Triton ops
    name the replay's kernels at the same places."""
    for g in graphs:
        if g.size != len(kernel_names):
            continue
        if all(t is None or t == k for t, k in zip(g.triton_names, kernel_names, strict=True)):
            return g
    return None


class _Builder:
    """Rows appended to a copy of the trace: ops and launch calls per matched replay, and
    the replayed kernels' correlation ids pointed at the copied launches."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.names = list(trace.names)
        self.name_id = {n: i for i, n in enumerate(self.names)}
        self.shapes = list(trace.shapes)
        self.strides = list(trace.strides)
        self.cpu: list[dict[str, np.ndarray]] = []
        self.rt: list[dict[str, np.ndarray]] = []
        self.correlation = trace.gpu.correlation.copy()
        self.next_corr = int(max(trace.runtime.correlation.max(initial=0),
                                 trace.gpu.correlation.max(initial=0))) + 1  # fmt: skip
        self.replays = 0
        # per capture (by id): its name/shape/stride ids in this trace, interned once
        self._maps: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def _map(self, g: Captured):
        key = id(g)
        if key not in self._maps:
            t = g.trace
            names = np.array([self._name(n) for n in t.names], dtype=np.int32)
            shapes = np.arange(len(self.shapes), len(self.shapes) + len(t.shapes), dtype=np.int32)
            self.shapes.extend(t.shapes)
            strides = np.arange(
                len(self.strides), len(self.strides) + len(t.strides), dtype=np.int32
            )
            self.strides.extend(t.strides)
            self._maps[key] = (names, shapes, strides)
        return self._maps[key]

    def _name(self, n: str) -> int:
        i = self.name_id.get(n)
        if i is None:
            i = self.name_id[n] = len(self.names)
            self.names.append(n)
        return i

    def add_replay(self, g: Captured, call: int, kernels: np.ndarray) -> None:
        names, shapes, strides = self._map(g)
        t, rt = g.trace, self.trace.runtime
        tid = SYNTHETIC_TID + self.replays
        self.replays += 1
        shift = float(rt.ts[call]) - g.start  # the capture's first launch at the replay's
        c, o = t.cpu, g.ops
        self.cpu.append({
            "ts": c.ts[o] + shift,
            "dur": c.dur[o].copy(),
            "name": names[c.name[o]],
            "tid": np.full(len(o), tid, dtype=np.int64),
            "kind": c.kind[o].copy(),
            "ext_id": np.full(len(o), -1, dtype=np.int64),
            "shape": _remap(c.shape[o], shapes),
            "strides": _remap(c.strides[o], strides),
            "seq": c.seq[o].copy(),
            "role": np.full(len(o), NO_ROLE, dtype=np.int8),
            "step": np.full(len(o), -1, dtype=np.int64),
            "collective": c.collective[o].copy(),
        })  # fmt: skip
        lr = g.launches
        corr = np.arange(self.next_corr, self.next_corr + len(lr), dtype=np.int64)
        self.next_corr += len(lr)
        self.rt.append({
            "ts": t.runtime.ts[lr] + shift,
            "dur": t.runtime.dur[lr].copy(),
            "name": names[t.runtime.name[lr]],
            "tid": np.full(len(lr), tid, dtype=np.int64),
            "correlation": corr,
            "call": np.full(len(lr), LAUNCH, dtype=np.int8),
        })  # fmt: skip
        self.correlation[kernels] = corr

    def build(self) -> Trace:
        tr = self.trace
        cpu = _concat(tr.cpu, self.cpu)
        rt = _concat(tr.runtime, self.rt)
        gpu = Table({**tr.gpu.cols, "correlation": self.correlation})
        return dataclasses.replace(
            tr, names=self.names, cpu=cpu, runtime=rt, gpu=gpu, shapes=self.shapes,
            strides=self.strides,
        )  # fmt: skip


def _remap(ids: np.ndarray, to: np.ndarray) -> np.ndarray:
    """`to[ids]`, with -1 (none) kept."""
    out = np.full(len(ids), -1, dtype=np.int32)
    has = ids >= 0
    out[has] = to[ids[has]]
    return out


def _concat(table: Table, parts: list[dict[str, np.ndarray]]) -> Table:
    if not parts:
        return table
    return Table({
        k: np.concatenate([v, *(p[k].astype(v.dtype, copy=False) for p in parts)])
        for k, v in table.cols.items()
    })  # fmt: skip
