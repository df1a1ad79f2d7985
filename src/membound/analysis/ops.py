"""Roofline join: each aten op call ↔ its kernels (device time) ↔ its cost ↔ the ceilings.

Method: a GPU activity carries the correlation id of the runtime call that launched it;
that call happened on some host thread at some time, inside a stack of CPU ops. The op a
kernel belongs to is the innermost op of that stack that the cost model knows (walking
outwards from the innermost op, e.g. `aten::addmm` inside `aten::linear`); when no op of
the stack has a formula, the innermost op. An op call's device time is the sum of its
kernels' durations; its FLOPs and minimal bytes come from `membound.cost.cost_of` applied
to the shapes, dtypes and scalars the profiler recorded. Host↔device copies are PCIe
time, not HBM work, and stay out of the roofline (the copy rules account for them). The
calls come back as `analysis.op_calls.OpCalls`; `analysis.op_rows` aggregates them by op
name and places the rows against the ceilings.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from membound.analysis import intervals as iv
from membound.analysis.op_calls import (
    OPCALL_FIELDS,
    OpCall,
    OpCalls,
    first_input_bytes,
    object_array,
    storage_dtype,
)
from membound.analysis.optimizer_ops import FOREACH as _FOREACH
from membound.analysis.optimizer_ops import cost_foreach_lists, cost_fused_adam
from membound.cost.registry import largest_read_of, read_bytes_of
from membound.trace.model import CPU_OP, D2D, GRAPH_LAUNCH, KERNEL, MEMCPY, Trace

#: kernel-name evidence of tensor cores (cuBLAS/cuDNN/CUTLASS naming) ...
_TENSOR_CORE = re.compile(
    r"tf32|tensorop|hmma|wgmma|warpgroup|gmma|bf16|fp16|f16f16|e4m3|e5m2|tensor\d+x\d+", re.I
)
#: ... and of fp32 GEMMs on CUDA cores
_SIMT = re.compile(r"sgemm|simt|ffma|f32f32_f32f32", re.I)


#: ATen's copy kernels name their element by size only (`OpaqueType<2u>`): for a TensorList
#: input (cat, stack) it is the only dtype evidence, as the profiler records none for lists
_OPAQUE = re.compile(r"OpaqueType<(\d+)u?>")
#: ops whose cost reads a TensorList at an assumed float32 (`cost.trace_args`)
_LIST_COPIES = frozenset(("aten::cat", "aten::concat", "aten::concatenate", "aten::stack"))


def _element_sizes(names: list[str]) -> list[int]:
    """Bytes per element a copy kernel's name states (0: it states none)."""
    out = []
    for n in names:
        m = _OPAQUE.search(n)
        out.append(int(m.group(1)) if m else 0)
    return out


def _tensor_core_flags(names: list[str]) -> list[bool | None]:
    out: list[bool | None] = []
    for n in names:
        out.append(True if _TENSOR_CORE.search(n) else False if _SIMT.search(n) else None)
    return out


def _cost_fn():
    """The cost model (`membound.cost.cost_of`), imported on first use: its formulas
    register on import. Tests replace this seam with a stub."""
    from membound.cost import cost_of

    return cost_of


class _Costs:
    """cost_of(name, shapes..., strides) memoised by (name id, shape id, strides id): traces
    repeat calls. The strides give each input's real extent (an expanded index, stride 0
    along a dim, is stored once: `cost.call.storage_extent`). `kernel_args`: the launch
    parameter names of the inductor kernels the capture compiled (`trace.kernel_args`, the
    capture meta's "kernel_args"), given to the cost of an op of that name (`arg_names`), so
    its reads and writes are counted apart; they depend on the name alone, which the memo's
    key holds."""

    def __init__(self, trace: Trace, kernel_args: dict[str, list[str]] | None = None):
        self.trace = trace
        self.fn = _cost_fn()
        self.cache: dict[tuple, Any] = {}
        self.kernel_args = kernel_args or {}

    def __call__(self, name_id: int, shape_id: int, strides_id: int = -1, list_dtypes=None):
        key = (name_id, shape_id, strides_id, list_dtypes)
        if key not in self.cache:
            self.cache[key] = self._compute(name_id, shape_id, strides_id, list_dtypes)
        return self.cache[key]

    def _compute(self, name_id: int, shape_id: int, strides_id: int, list_dtypes=None):
        if shape_id < 0:
            return None
        dims, types, concrete = self.trace.shapes[shape_id]
        name = self.trace.names[name_id]
        try:
            strides = list(self.trace.strides[strides_id]) if strides_id >= 0 else None
            args = (name, list(dims or []), list(types or []), concrete, strides)
            # the TensorLists' dtypes, where a kernel named them (`_list_dtypes`)
            extra = {"list_dtypes": list_dtypes} if list_dtypes is not None else {}
            arg_names = self.kernel_args.get(name)
            if arg_names is not None:
                extra["arg_names"] = arg_names
            cost = self.fn(*args, **extra)
        except Exception:  # a formula that cannot read these shapes: no cost, not a crash
            return None
        if (
            cost is None
            or getattr(cost, "family", "") == "unknown"
            or not getattr(cost, "exact", True)
        ):
            return None
        return cost


def _by_thread_and_start(tid: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Order by thread, then start, then the longer first (then position): `np.lexsort` of
    those keys. Op starts rarely tie, and without ties the duration key decides nothing: a
    stable sort by start (the trace is nearly in that order already) then by thread gives
    the same order several times faster."""
    by_ts = np.argsort(ts, kind="stable")
    t = ts[by_ts]
    # NaNs (sorted last) tie with each other in a sort
    if len(t) > 1 and (bool(np.any(t[1:] == t[:-1])) or np.isnan(t[-1])):
        return np.lexsort((-dur, ts, tid))
    return by_ts[np.argsort(tid[by_ts], kind="stable")]


def _parents(trace: Trace) -> tuple[np.ndarray, dict[int, tuple[np.ndarray, np.ndarray]]]:
    """Parent index of each CPU op (same thread, enclosing span), and per-thread sorted ops.

    Ops of a thread in order of start (the longer first on a tie): the parent of one is the
    nearest op before it that has not ended by its start (what a stack of open spans, popped
    as they end, has on top). Found for all ops at once by pointer jumping: an op's candidate
    starts at its predecessor; while the candidate ended by the op's start, the op jumps to
    the candidate's own candidate, as every op between those two ended before the candidate
    started. Each round at least doubles the distance covered, so a thread's run of
    siblings takes a few rounds, not one per sibling."""
    cpu = trace.cpu
    parent = np.full(len(cpu), -1, dtype=np.int64)
    per_tid: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    ops = np.flatnonzero(cpu.kind == CPU_OP)
    if not len(ops):
        return parent, per_tid
    order = ops[_by_thread_and_start(cpu.tid[ops], cpu.ts[ops], cpu.dur[ops])]
    ts = cpu.ts[order]
    end = ts + cpu.dur[order]
    tid = cpu.tid[order]
    n = len(order)
    first = np.ones(n, dtype=bool)
    first[1:] = tid[1:] != tid[:-1]
    cand = np.arange(-1, n - 1, dtype=np.int64)
    cand[first] = -1
    starts = np.flatnonzero(first)
    bounds = np.append(starts, n)
    # an op starting after every earlier op of its thread ended has none: settled at once
    # (else a thread's top-level ops would jump through all their predecessors)
    reach = np.full(n, -np.inf)
    for lo, hi in zip(starts.tolist(), bounds[1:].tolist(), strict=True):
        reach[lo + 1 : hi] = np.maximum.accumulate(end[lo : hi - 1])
    cand[reach <= ts] = -1
    # `ended` is `end <= ts`, not `not end > ts`: what popping `while end <= ts` leaves on top
    live = np.flatnonzero(cand >= 0)
    while len(live):
        c = cand[live]
        ended = end[c] <= ts[live]
        live = live[ended]
        cand[live] = cand[c[ended]]
        live = live[cand[live] >= 0]
    parent[order] = np.where(cand >= 0, order[np.maximum(cand, 0)], -1)
    for k, lo in enumerate(starts.tolist()):
        idx = order[lo : bounds[k + 1]]
        per_tid[int(tid[lo])] = (idx, cpu.ts[idx])
    return parent, per_tid


def _innermost(trace: Trace, parent, per_tid, tids: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Innermost CPU op on each call's thread enclosing its time (-1 if none), vectorised."""
    cpu = trace.cpu
    end = cpu.ts + cpu.dur
    out = np.full(len(times), -1, dtype=np.int64)
    for tid in iv.distinct(tids):
        entry = per_tid.get(int(tid))
        if entry is None:
            continue
        idx, starts = entry
        sel = np.flatnonzero(tids == tid)
        t = times[sel]
        j = np.searchsorted(starts, t, side="right") - 1
        cand = np.where(j >= 0, idx[np.maximum(j, 0)], -1)
        # the latest op starting before t either contains t or ended before it; then the
        # innermost op containing t is one of its ancestors
        while True:
            bad = (cand >= 0) & (end[np.maximum(cand, 0)] <= t)
            if not bad.any():
                break
            cand = np.where(bad, parent[np.maximum(cand, 0)], cand)
        out[sel] = cand
    return out


def on_device(gpu) -> np.ndarray:
    """GPU activities that are device work an op is charged for: kernels, memsets and
    device-to-device copies (host<->device copies are PCIe time, not HBM work: the copy rules
    account for them)."""
    return (gpu.kind != MEMCPY) | (gpu.direction == D2D)


def _clipped(ts: np.ndarray, dur: np.ndarray, windows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, inside) of activities cut to `windows` ((starts, ends): sorted, disjoint
    step windows): the time of each inside them (an activity across a gap between windows
    keeps its parts in them), from its first instant in their span; `inside`: some of it is
    in a window (an instantaneous activity counts when it lies in one)."""
    end = ts + dur
    if windows is None:
        return ts, end, np.ones(len(ts), dtype=bool)
    w0, w1 = (np.asarray(w, dtype=np.float64) for w in windows)
    if not len(w0):
        return ts, end, np.zeros(len(ts), dtype=bool)
    covered = np.concatenate([[0.0], np.cumsum(w1 - w0)])

    def before(t: np.ndarray) -> np.ndarray:
        """Window time before instant t."""
        j = np.searchsorted(w0, t, side="right") - 1
        part = np.clip(t - w0[np.maximum(j, 0)], 0.0, (w1 - w0)[np.maximum(j, 0)])
        return np.where(j >= 0, covered[np.maximum(j, 0)] + part, 0.0)

    time = before(end) - before(ts)
    j = np.searchsorted(w0, ts, side="right") - 1
    in_one = (j >= 0) & (ts <= w1[np.maximum(j, 0)])
    start = np.clip(ts, w0[0], w1[-1])
    return start, start + time, (time > 0) | ((dur == 0) & in_one)


def device_time_us(trace: Trace, windows=None) -> float:
    """Summed time of the device work ops are charged for (`on_device`), cut to `windows`
    ((starts, ends) of the analysed steps): the denominator of an op row's
    `share_of_gpu_time`, so that no op's share exceeds 1 and all ops' shares add up to at
    most 1 (kernels overlapping on several streams each count their own time, above and
    below the line alike)."""
    gpu = trace.gpu
    if not len(gpu):
        return 0.0
    return _time_us(gpu, on_device(gpu), windows)


def _time_us(gpu, m: np.ndarray, windows) -> float:
    """Summed time of GPU activities `m` (a mask), cut to `windows`."""
    s, e, inside = _clipped(gpu.ts[m], gpu.dur[m], windows)
    return float(np.sum((e - s)[inside]))


def graph_replay_time_us(trace: Trace, windows=None) -> float:
    """The part of `device_time_us` launched by CUDA-graph launches (`cudaGraphLaunch`):
    device work no op is charged with, since a replay's kernels carry only the launch's
    correlation, no op and no arguments."""
    rt, gpu = trace.runtime, trace.gpu
    if not len(rt) or not len(gpu):
        return 0.0
    ids = rt.correlation[(rt.call == GRAPH_LAUNCH) & (rt.correlation >= 0)]
    m = on_device(gpu) & np.isin(gpu.correlation, ids)
    return _time_us(gpu, m, windows) if m.any() else 0.0


def join_calls(trace: Trace, windows=None, kernel_args=None) -> OpCalls:
    """Op calls with their kernels, in order of their first kernel; with `windows` ((starts,
    ends) µs of the analysed steps), kernels are cut to them and those outside left out, so
    op time and the steps' time cover the same span. `kernel_args`: {inductor kernel name:
    its launch parameter names} from the capture (`_Costs`), which split those kernels'
    bytes into reads and writes; None costs every call from the trace alone."""
    gpu, rt, cpu = trace.gpu, trace.runtime, trace.cpu
    if not len(gpu) or not len(rt) or not len(cpu):
        return []
    # a big trace has millions of activities and calls: each array over them is let go
    # (`del`) once used, so they are not all held at the end (1.8M calls: ~0.3 GB)
    parent, per_tid = _parents(trace)
    # which CPU ops the cost model knows: evaluated once per distinct (name, shapes, strides)
    costs = _Costs(trace, kernel_args)
    key = _op_keys(trace)
    uniq, inv = iv.distinct_inverse(key)
    del key
    parts = [_op_key_parts(trace, k) for k in uniq.tolist()]
    ucost = [costs(*p) for p in parts]
    _list_dtypes(trace, parent, per_tid, costs, parts, inv, ucost)
    del parts
    known = (
        np.array([c is not None for c in ucost], dtype=bool)[inv]
        if len(uniq)
        else np.zeros(0, bool)
    )
    owner = _owners(trace, parent, per_tid, known)
    del per_tid, known
    g = np.flatnonzero(owner >= 0)
    start, end, inside = _clipped(gpu.ts[g], gpu.dur[g], windows)
    g, start, dur = g[inside], start[inside], (end - start)[inside]
    del end, inside
    if not len(g):
        return []
    calls_idx, ginv = iv.distinct_inverse(owner[g])
    del owner
    first = np.full(len(calls_idx), np.inf)
    np.minimum.at(first, ginv, start)
    # calls in order of the first kernel (a stable sort: calls of one start keep their
    # order), numbered so before their columns are made: a call's sums over its kernels are
    # the same under any numbering, and no column needs a sorted copy
    if np.isnan(first).any():
        order = np.array(sorted(range(len(first)), key=first.tolist().__getitem__), dtype=np.int64)
    else:
        order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    ginv = rank[ginv]
    calls_idx, first = calls_idx[order], first[order]
    del rank, order
    kc = _kernel_columns(trace, g, start, dur, ginv, len(calls_idx))
    del g, start, dur, ginv
    # what a call's op and shapes give (its cost, dtypes, storage, first input's bytes) is
    # found once per distinct (name, shapes) and spread to the calls by index
    ukeys, kinv = iv.distinct_inverse(inv[calls_idx])
    del inv
    per_key = _per_key(trace, [ucost[k] for k in ukeys.tolist()], uniq[ukeys])
    flops = per_key["flops"][kinv]
    nbytes = per_key["bytes"][kinv]
    reads = per_key["read_bytes"][kinv]
    largest = per_key["largest_read"][kinv]
    esize = kc.pop("esize")
    listed = (esize > 0) & per_key["list_copy"][kinv]
    # the list was costed as float32 (4 bytes an element): its reads and writes alike
    nbytes[listed] *= esize[listed] / 4
    reads[listed] *= esize[listed] / 4
    del esize, listed
    compute = per_key["compute"][kinv]
    # an fp32 GEMM whose kernel ran on tensor cores ran at the TF32 rate
    tc = kc.pop("tc")
    compute[per_key["fp32"][kinv] & (tc == 2)] = "tf32"
    seq, backward = _autograd_of(trace, parent, calls_idx)
    del parent
    names = per_key["name"][kinv]
    known = per_key["known"][kinv].astype(bool)
    family = per_key["family"][kinv]
    cost_fused_adam(
        trace, windows, calls_idx, names, known, nbytes, reads, flops, compute, family,
        kc["device_us"], first,
    )  # fmt: skip
    cost_foreach_lists(
        trace, windows, calls_idx, names, known, nbytes, reads, flops, compute, family,
        kc.pop("mta_blocks"), kc.pop("mta_name"), _cost_fn(),
    )  # fmt: skip
    columns = {
        "cpu_index": calls_idx,
        "name": names,
        "tid": cpu.tid[calls_idx],
        "first_kernel_us": first,
        "last_kernel_end_us": kc["last"],
        "device_us": kc["device_us"],  # kernels, and the copies/memsets of e.g. copy_
        "kernels": kc["kernels"],
        "flops": flops,
        "bytes": nbytes,
        "compute": compute,
        "family": family,
        "known": known,
        "dtypes": per_key["dtypes"][kinv],
        "dims": per_key["dims"][kinv],
        "storage_dtype": per_key["storage_dtype"][kinv],
        "tensor_cores": np.array([None, False, True], dtype=object)[tc],
        "first_input_bytes": per_key["first_input_bytes"][kinv],
        "seq": seq,
        "backward": backward,
        "read_bytes": reads,
        "largest_read": largest,
    }
    return OpCalls({f: columns[f] for f in OPCALL_FIELDS})


def _list_dtypes(trace: Trace, parent, per_tid, costs: _Costs, parts, inv, ucost: list) -> None:
    """Cost the `_foreach_*` calls the trace alone could not (it records no dtype for a
    TensorList) with the dtype their multi_tensor_apply kernels name
    (`cost.formulas.foreach.list_dtypes_of`), in place in `ucost` (per distinct key, `parts`
    its (name id, shape id, strides id); `inv`: each CPU op's key). A key whose calls'
    kernels name no dtype, or disagree, stays uncosted."""
    names = trace.names
    cand = [
        i
        for i, (name_id, shape_id, _) in enumerate(parts)
        if ucost[i] is None and shape_id >= 0 and names[name_id].startswith(_FOREACH)
    ]
    if not cand:
        return
    from membound.cost.formulas.foreach import list_dtypes_of

    is_cand = np.zeros(len(parts), dtype=bool)
    is_cand[cand] = True
    owner = _owners(trace, parent, per_tid, is_cand[inv])
    g = np.flatnonzero(owner >= 0)
    g = g[is_cand[inv[owner[g]]]]  # kernels a candidate launched (not its fallback owner)
    if not len(g):
        return
    # the kernel names of each candidate key, judged once per distinct (key, kernel name)
    pairs = np.unique(np.stack([inv[owner[g]], trace.gpu.name[g].astype(np.int64)]), axis=1)
    kernels: dict[int, list[str]] = {}
    for k, n in pairs.T.tolist():
        kernels.setdefault(k, []).append(names[n])
    for i, kernel_names in kernels.items():
        dtypes = list_dtypes_of(names[parts[i][0]], kernel_names)
        if dtypes is not None:
            ucost[i] = costs(*parts[i], dtypes)


def _owners(trace: Trace, parent: np.ndarray, per_tid, known: np.ndarray) -> np.ndarray:
    """The CPU op each GPU activity is charged to (-1: none): the innermost op enclosing its
    launching runtime call (by correlation id) that the cost model knows (`known`, per CPU
    op), else the innermost op. Host<->device copies are charged to none."""
    gpu, rt = trace.gpu, trace.runtime
    # GPU activity -> its launching runtime call (by correlation id)
    launch = iv.lookup(rt.correlation, gpu.correlation)
    # host<->device copies stay out of the roofline; kernels, memsets and D2D copies join
    has = (launch >= 0) & on_device(gpu)
    launches = iv.distinct(launch[has])
    inner = _innermost(trace, parent, per_tid, rt.tid[launches], rt.ts[launches])
    # walk outwards to the innermost op with a cost; none: the innermost op
    chosen = np.full(len(inner), -1, dtype=np.int64)
    cur = inner.copy()
    while True:
        live = (cur >= 0) & (chosen < 0)
        if not live.any():
            break
        hit = live & known[np.maximum(cur, 0)]
        chosen[hit] = cur[hit]
        cur = np.where(live & ~hit, parent[np.maximum(cur, 0)], -1)
    # A composite whose own children are costed (SDPA's math path: its bmm and softmax) has
    # a formula for the whole; the kernels of an uncosted child reached it by the walk would
    # set that whole against a sliver of its time (T5's SDPA at 373% of its roof through
    # isneginf's kernels, 2026-12-05). Those kernels stay with their innermost op, uncosted.
    composite = np.zeros(len(parent), dtype=bool)
    direct = (chosen >= 0) & (chosen == inner)  # launched by a costed op itself
    up = np.where(direct, parent[np.maximum(chosen, 0)], -1)
    while True:
        live = up >= 0
        if not live.any():
            break
        fresh = live & ~composite[np.maximum(up, 0)]
        composite[up[fresh]] = True
        up = np.where(fresh, parent[np.maximum(up, 0)], -1)
    walked = (chosen >= 0) & (chosen != inner) & composite[np.maximum(chosen, 0)]
    chosen = np.where(walked, -1, chosen)
    chosen = np.where(chosen >= 0, chosen, inner)
    owner = np.full(len(gpu), -1, dtype=np.int64)
    owner[has] = chosen[np.searchsorted(launches, launch[has])]
    return owner


def _kernel_columns(
    trace: Trace, g: np.ndarray, start: np.ndarray, dur: np.ndarray, ginv: np.ndarray, n: int
) -> dict[str, np.ndarray]:
    """Per call (`ginv`: the call of each of GPU activities `g`, cut to `start`/`dur`): its
    device time, kernel count and last kernel end, and from its kernels' names the
    tensor-core evidence (`tc`) and the element size of its copies (`esize`)."""
    gpu = trace.gpu
    device_us = np.bincount(ginv, weights=dur, minlength=n)
    kernels = np.bincount(ginv, weights=(gpu.kind[g] == KERNEL).astype(np.float64), minlength=n)
    last = np.full(n, -np.inf)
    np.maximum.at(last, ginv, start + dur)
    # tensor-core evidence per call: 2 = some kernel says tensor cores, 1 = some says CUDA-core
    # fp32 GEMM (and none tensor cores), 0 = no evidence; judged once per kernel name
    uname, name_inv = iv.distinct_inverse(gpu.name[g])
    names = [trace.names[int(i)] for i in uname.tolist()]
    flag_of = np.array(
        [{True: 2, False: 1, None: 0}[f] for f in _tensor_core_flags(names)] or [0],
        dtype=np.int8,
    )
    tc = np.zeros(n, dtype=np.int8)
    np.maximum.at(tc, ginv, flag_of[name_inv])
    # element size per call from its copy kernels' names (cat/stack of a TensorList only)
    esize_of = np.array(_element_sizes(names) or [0], dtype=np.int64)
    esize = np.zeros(n, dtype=np.int64)
    np.maximum.at(esize, ginv, esize_of[name_inv])
    # per call: its multi_tensor_apply kernels' blocks and one of their names
    # (`optimizer_ops.cost_foreach_lists`); a reader without launch grids leaves them none
    mta_blocks = np.zeros(n, dtype=np.int64)
    mta_name = np.full(n, -1, dtype=np.int64)
    grid = gpu.cols.get("blocks")
    if grid is not None:
        is_mta = np.array(["multi_tensor_apply_kernel" in x for x in names] or [False])
        m = is_mta[name_inv] & (grid[g] > 0)
        np.add.at(mta_blocks, ginv[m], grid[g][m])
        np.maximum.at(mta_name, ginv[m], gpu.name[g][m].astype(np.int64))
    return {
        "device_us": device_us,
        "kernels": kernels.astype(np.int64),
        "last": last,
        "tc": tc,
        "esize": esize,
        "mta_blocks": mta_blocks,
        "mta_name": mta_name,
    }


#: the names of the ops autograd runs a backward node under
_BACKWARD_PREFIX = "autograd::engine::evaluate_function"


def _autograd_of(
    trace: Trace, parent: np.ndarray, idx: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(seq, backward) of CPU ops `idx`: the autograd sequence number of each op or of its
    nearest enclosing op that has one (-1: none), and whether that op is a backward node
    (its name, or its parent's, is autograd's `evaluate_function: XBackward0`), or runs
    anywhere inside an `evaluate_function` (AccumulateGrad's, which has no number). A trace
    without the column (another reader) gives -1 and False."""
    cpu = trace.cpu
    seq_col = cpu.cols.get("seq")
    if seq_col is None or not len(idx):
        return np.full(len(idx), -1, dtype=np.int64), np.zeros(len(idx), dtype=bool)
    cur = idx.astype(np.int64).copy()
    holder = np.full(len(idx), -1, dtype=np.int64)
    for _ in range(64):  # op stacks are shallow; the bound only stops a cycle
        live = (cur >= 0) & (holder < 0)
        if not live.any():
            break
        hit = live & (seq_col[np.maximum(cur, 0)] >= 0)
        holder[hit] = cur[hit]
        cur = np.where(live & ~hit, parent[np.maximum(cur, 0)], -1)
    found = holder >= 0
    seq = np.where(found, seq_col[np.maximum(holder, 0)], -1).astype(np.int64)
    names = trace.names or [""]
    is_engine = np.array([n.startswith(_BACKWARD_PREFIX) for n in names], dtype=bool)
    is_bwd_name = is_engine | np.array([n.endswith(("Backward0", "Backward1")) for n in names])
    up = parent[np.maximum(holder, 0)]
    backward = found & (
        is_bwd_name[cpu.name[np.maximum(holder, 0)]]
        | ((up >= 0) & is_bwd_name[cpu.name[np.maximum(up, 0)]])
    )
    # a node without a sequence number runs in the engine too: AccumulateGrad's add_ of a
    # micro-batch's gradient into .grad (eager GPT-2: 75 a step) is backward work
    cur = parent[idx]
    for _ in range(64):
        live = (cur >= 0) & ~backward
        if not live.any():
            break
        backward |= live & is_engine[cpu.name[np.maximum(cur, 0)]]
        cur = np.where(live, parent[np.maximum(cur, 0)], -1)
    return seq, backward


def _op_keys(trace: Trace) -> np.ndarray:
    """One int64 per CPU op naming its (name, shapes, strides): (name id × (shapes + 1) +
    shape id + 1) × (strides + 1) + strides id + 1 (`_op_key_parts` takes it apart)."""
    cpu = trace.cpu
    width = len(trace.strides) + 1
    base = cpu.name.astype(np.int64) * (len(trace.shapes) + 1) + (cpu.shape.astype(np.int64) + 1)
    return base * width + (cpu.strides.astype(np.int64) + 1)


def _op_key_parts(trace: Trace, key: int) -> tuple[int, int, int]:
    """(name id, shape id, strides id) of an `_op_keys` key (-1: none recorded)."""
    rest, strides_id = divmod(int(key), len(trace.strides) + 1)
    name_id, shape_id = divmod(rest, len(trace.shapes) + 1)
    return name_id, shape_id - 1, strides_id - 1


def _per_key(trace: Trace, costs: list, keys: np.ndarray) -> dict[str, np.ndarray]:
    """OpCall's fields that depend on its (name, shapes, strides) alone, one entry per key of
    `keys` (`_op_keys`, as `join_calls` keys them) with its `costs`."""
    names, shapes = trace.names, trace.shapes
    per_shape: dict[int, tuple] = {}  # what each distinct shape gives, computed once
    rows = []
    for cost, k in zip(costs, keys.tolist(), strict=True):
        name_id, sid, _ = _op_key_parts(trace, k)
        name = names[name_id]
        got = per_shape.get(sid)
        if got is None:
            shape = shapes[sid] if sid >= 0 else (None, None, None)
            dtypes_ = tuple(str(t) for t in (shape[1] or []) if t)
            storage_ = storage_dtype(shape[0], shape[1])
            got = per_shape[sid] = (
                dtypes_,
                shape[0],
                storage_,
                first_input_bytes(shape[0], storage_, dtypes_),
            )
        dtypes_, dims_, storage_, first_bytes = got
        rows.append(
            (
                name,
                float(cost.flops) if cost else 0.0,
                float(cost.bytes) if cost else 0.0,
                read_bytes_of(cost),
                largest_read_of(cost),
                cost.compute if cost else None,
                cost.family if cost else "",
                cost is not None,
                dtypes_,
                dims_,
                storage_,
                first_bytes,
                "TensorList" in dtypes_ and name in _LIST_COPIES,
                bool(cost and cost.compute == "fp32"),
            )
        )
    fields = ("name", "flops", "bytes", "read_bytes", "largest_read", "compute", "family", "known", "dtypes",
              "dims", "storage_dtype", "first_input_bytes", "list_copy", "fp32")  # fmt: skip
    cols = list(zip(*rows, strict=True)) if rows else [()] * len(fields)
    out = {f: object_array(list(v)) for f, v in zip(fields, cols, strict=True)}
    for f in ("flops", "bytes", "read_bytes", "largest_read"):
        out[f] = np.array(cols[fields.index(f)], dtype=np.float64)
    for f in ("list_copy", "fp32"):
        out[f] = np.array(cols[fields.index(f)], dtype=bool)
    return out


def cpu_calls(trace: Trace) -> list[OpCall]:
    """Op calls of a CPU-only trace, timed by host time (no kernels to join).

    The owners of time are the outermost ops the cost model knows (e.g. `aten::addmm` inside
    `aten::linear`); an op it does not know is descended into when something below it is
    known, and taken whole (no cost) when nothing is. `device_us` holds the op's CPU time.
    """
    cpu = trace.cpu
    if not len(cpu):
        return []
    parent, _ = _parents(trace)
    ops = np.flatnonzero(cpu.kind == CPU_OP)
    costs = _Costs(trace)
    cost = {
        int(i): costs(int(cpu.name[i]), int(cpu.shape[i]), int(cpu.strides[i]))
        for i in ops.tolist()
    }
    known = {i: c is not None for i, c in cost.items()}
    # children before parents: deeper ops start later or end earlier within one thread
    depth = {}
    for i in ops.tolist():
        d, p = 0, int(parent[i])
        while p >= 0:
            d, p = d + 1, int(parent[p])
        depth[i] = d
    below = dict.fromkeys(depth, False)  # some descendant is known
    for i in sorted(depth, key=depth.get, reverse=True):
        p = int(parent[i])
        if p >= 0 and p in below:
            below[p] = below[p] or known[i] or below[i]
    visited: dict[int, bool] = {}
    for i in sorted(depth, key=depth.get):
        p = int(parent[i])
        visited[i] = p < 0 or p not in visited or (visited[p] and not known[p] and below[p])
    out = []
    names, shapes = trace.names, trace.shapes
    for i in ops.tolist():
        if not visited[i] or not (known[i] or not below[i]):
            continue
        c = cost[i]
        sid = int(cpu.shape[i])
        shape = shapes[sid] if sid >= 0 else (None, None, None)
        ts, dur = float(cpu.ts[i]), float(cpu.dur[i])
        out.append(
            OpCall(
                cpu_index=i,
                name=names[int(cpu.name[i])],
                tid=int(cpu.tid[i]),
                first_kernel_us=ts,
                last_kernel_end_us=ts + dur,
                device_us=dur,
                kernels=0,
                flops=float(c.flops) if c else 0.0,
                bytes=float(c.bytes) if c else 0.0,
                compute=c.compute if c else None,
                family=c.family if c else "",
                known=c is not None,
                dtypes=tuple(str(t) for t in (shape[1] or []) if t),
                dims=shape[0],
                storage_dtype=storage_dtype(shape[0], shape[1]),
                read_bytes=read_bytes_of(c),
                largest_read=largest_read_of(c),
            )
        )
    out.sort(key=lambda c: c.first_kernel_us)
    return out
