"""HBM-bound work: `memory-bound-op`, `unfused-chain`, `fp32-storage`.

These need the op rows placed on a roofline (ceilings known) and op costs (shapes recorded).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from membound.analysis import kernel_map, model_reach, norm_whatif, optimizer_whatif
from membound.analysis.findings import rule
from membound.analysis.fixes import (
    NORMS,
    Replayed,
    chain_fix,
    host_limited,
    memory_bound_fix,
    op_family,
)
from membound.analysis.op_calls import call_column, first_input_bytes, value_codes
from membound.analysis.roofline import call_memory_roof, call_rates, copy_rate_only
from membound.analysis.rules import norm_written
from membound.analysis.rules.memory_gap import LATENCY_US, attainable_ms, memory_ops_below_roof
from membound.dtypes import probed_float

#: share of kernel time above which a memory-bound op is worth a finding of its own
MEMORY_OP_SHARE = 0.10
#: cost-model families whose ops a fused kernel can chain without HBM round trips
FUSIBLE_FAMILIES = {
    "elementwise",
    "pointwise",
    "unary",
    "binary",
    "activation",
    "dropout",
    "norm",
    "normalization",
}
FUSIBLE_NAMES = {
    "aten::add",
    "aten::add_",
    "aten::sub",
    "aten::mul",
    "aten::mul_",
    "aten::div",
    "aten::relu",
    "aten::relu_",
    "aten::gelu",
    "aten::silu",
    "aten::sigmoid",
    "aten::tanh",
    "aten::dropout",
    "aten::native_dropout",
    "aten::native_layer_norm",
    "aten::layer_norm",
    "aten::rms_norm",
    "aten::_fused_rms_norm",
    "aten::native_group_norm",
    "aten::exp",
    "aten::neg",
    "aten::pow",
}


def _bandwidth(ctx) -> float | None:
    return ctx.memory_bandwidth()


def _call_roofs(ctx, cols: _Columns, idx: np.ndarray) -> np.ndarray | None:
    """Bytes/s of the memory roof each call of `idx` is held to, as its op row was placed
    (`analysis.roofline.call_rates`: L2's for calls whose bytes fit in L2, L2's for the reads
    of a call whose every read argument fits in L2, the write rate for fills, else HBM's for
    the share of its bytes the call reads), found once per distinct (family, bytes, read
    share, fit); None when every call is held to the HBM copy rate
    (`roofline.copy_rate_only`)."""
    c = ctx.ceilings
    if c is None or copy_rate_only(c):
        return None
    nbytes, reads, largest = cols.bytes[idx], cols.reads[idx], cols.largest[idx]
    family_code, families = value_codes([cols.families[i] for i in idx.tolist()])
    out = np.empty(len(idx), dtype=np.float64)
    for k, family in enumerate(families):
        of = family_code == k
        out[of] = call_rates(c, nbytes[of], reads[of], family, largest[of])[1]
    return out


def _rows_by_name(ctx):
    return {r.name: r for r in ctx.rows}


#: an op reaching at least this fraction of its memory roof is near it: the time above the
#: roof is then not worth a finding of its own (only fewer bytes would make it faster)
NEAR_ROOF = 0.6


@rule("memory-bound-op")
def memory_bound_op(ctx):
    """An op left of the ridge, far below its roof, that takes a large share of GPU time.

    For each op row with bound = memory, ≥ `MEMORY_OP_SHARE` of kernel time, below
    `NEAR_ROOF` of its attainable rate, and calls big enough to be bandwidth- rather than
    latency-bound (≥ `LATENCY_US` at the roof per call): time lost per step = (its device time − its minimal
    bytes ÷ its memory roof) ÷ steps, i.e. the time it spends *above* its own roof (the roof
    its placement chose: HBM's copy rate, L2's for calls that fit in L2, the write rate for
    fills). The time *at* the roof is not counted here: moving fewer bytes is what shortens
    it, and `fp32-storage` (½ of it, for fp32 ops) and `unfused-chain` (the intermediates'
    round trips) report that, so no instant is counted by two of these rules.
    """
    bw = _bandwidth(ctx)
    if not bw:
        return []
    cols = _columns_of(ctx)
    after_add = _after_residual_add(cols)
    claimed = _claimed_by_name(ctx, cols, bw)
    limited = host_limited(ctx.timing)
    replayed = norm_whatif.of(ctx)
    out = []
    for r in ctx.rows:
        if r.bound != "memory" or r.share_of_gpu_time < MEMORY_OP_SHARE:
            continue
        if r.fraction_of_attainable is not None and r.fraction_of_attainable >= NEAR_ROOF:
            continue
        if op_family(r.name) == "rnn":
            # cuDNN's recurrent layer runs its time steps one after another: its distance
            # from the roof is the recurrence's, not bytes a fix could move faster (the LSTM
            # of examples/real, H100: 0-1% of its roof; compile saved nothing)
            continue
        at_roof_ms = attainable_ms(r, bw)
        if at_roof_ms / max(r.calls, 1) * 1e3 < LATENCY_US:
            continue  # kilobyte-sized calls: latency, not bandwidth (launch-bound's to report)
        # the calls of a written-out norm are that finding's (unfused-chain)
        taken_ms, taken_roof_ms = claimed.get(r.name, (0.0, 0.0))
        lost = ctx.per_op_step(max((r.device_ms - taken_ms) - (at_roof_ms - taken_roof_ms), 0.0))
        if not lost > 0.0 and r.name in claimed:
            continue
        layout = None
        if op_family(r.name) == "upsample" and ctx.layout_ratios:
            layout = _layout_saving(ctx, cols, r.name)
            if layout is not None:  # channels_last timed here: what it saves, not the gap
                lost = max(ctx.per_op_step(layout["saving_ms"]) + lost * layout["rest"], 0.0)
        norm = op_family(r.name) in NORMS
        what = limited
        if norm and replayed is not None:  # the replay decides (this remedy is swap_norms)
            saving = replayed["swap_norms_ms_per_step"]
            what = Replayed(saving) if saving <= 0 else None
        evidence = {
            "op": r.name,
            "calls_per_step": ctx.per_op_step(r.calls),
            "device_ms_per_step": ctx.per_op_step(r.device_ms),
            "bytes_per_step": ctx.per_op_step(r.bytes),
            "arithmetic_intensity": r.arithmetic_intensity,
            "achieved_bandwidth_fraction": r.achieved_bandwidth_fraction,
            "memory_roof": r.memory_roof,
            "share_of_gpu_time": r.share_of_gpu_time,
            "attainable_ms_per_step": ctx.per_op_step(at_roof_ms),
            "dtypes": r.dtypes,
            "host_limited": what is not None,
        }
        if norm and replayed is not None:
            evidence["norm_whatif"] = replayed
        if layout is not None:
            evidence["channels_last_measured"] = {
                "saving_ms_per_step": ctx.per_op_step(layout["saving_ms"]),
                "share_of_calls_measured": 1.0 - layout["rest"],
                "ratios": layout["ratios"],
            }
        fix = memory_bound_fix(r.name, r.name in after_add, what)
        if layout is not None:
            timed = ", ".join(
                f"{k} in {v:.0%} of its NCHW time" for k, v in layout["ratios"].items()
            )
            fix += f" Timed here in both layouts after the script: channels_last ran {timed}."
        out.append(
            ctx.finding(
                code="memory-bound-op",
                title=f"{r.name} is memory-bound and takes {r.share_of_gpu_time:.0%} of GPU time",
                lost_ms=lost,
                evidence=evidence,
                fix=fix,
            )
        )
    return out + memory_ops_below_roof(ctx, bw, {f.evidence["op"] for f in out}, claimed)


def _layout_saving(ctx, cols: _Columns, name: str) -> dict | None:
    """What channels_last saves on op `name`'s calls, from its time on them measured after
    the script (`trace.layout_probe`: channels_last over NCHW per input shape and dtype):
    {"saving_ms": each measured call's time x (1 - its ratio), summed (the analysed steps'
    total); "rest": the share of the op's time in calls of no measured shape, which keep
    their gap to the roof; "ratios": {shape: ratio} used}; None when no call's shape was
    measured."""
    idx = np.flatnonzero(cols.names_in({name}))
    total = float(cols.device_us[idx].sum())
    saving = measured = 0.0
    used: dict[str, float] = {}
    time_of: dict[str, float] = {}
    for i in idx.tolist():
        call = ctx.calls[i]
        dims = call.dims[0] if isinstance(call.dims, list) and call.dims else None
        dtype = probed_float(call.dtypes[0] if call.dtypes else None)
        if not isinstance(dims, list) or dtype is None:
            continue
        ratio = ctx.layout_ratios.get((name, tuple(dims), dtype))
        if ratio is None:
            continue
        t = float(cols.device_us[i])
        measured += t
        saving += t * (1.0 - ratio)
        shape = "x".join(map(str, dims)) + f" {dtype}"
        used[shape] = round(ratio, 4)
        time_of[shape] = time_of.get(shape, 0.0) + t
    if not measured or not total:
        return None
    used = {k: used[k] for k in sorted(used, key=lambda k: -time_of[k])}  # most time first
    return {"saving_ms": saving / 1e3, "rest": max(total - measured, 0.0) / total, "ratios": used}


def _claimed_by_name(ctx, cols: _Columns, bw: float) -> dict[str, tuple[float, float]]:
    """op name -> (device ms, ms at the memory roof) of its calls that a written-out norm
    or a loop chain holds (`_Columns.taken`): taken out of the op rows the memory-bound-op
    findings read."""
    idx = np.flatnonzero(cols.taken)
    if not len(idx):
        return {}
    roof = _call_roofs(ctx, cols, idx)
    at_roof = cols.bytes[idx] / (bw if roof is None else roof) * 1e3
    out: dict[str, tuple[float, float]] = {}
    for i, r_ms in zip(idx.tolist(), at_roof.tolist(), strict=True):
        dev, roof_ms = out.get(cols.names[i], (0.0, 0.0))
        out[cols.names[i]] = (dev + float(cols.device_us[i]) / 1e3, roof_ms + r_ms)
    return out


ADDS = ("aten::add", "aten::add_")


class _Columns:
    """What the memory rules read of each op call, as arrays over `calls` in their order,
    with the chains: built once per analysis (`_columns_of`), so the rules loop over chains,
    not calls.

    A chain is a run of consecutive fusible calls on one thread over tensors of the same
    size: `link[i]` says calls[i] continues calls[i - 1]'s; chain k is
    calls[starts[k]:ends[k]] (at least two calls)."""

    def __init__(self, calls, host_ts: np.ndarray | None = None):
        n = len(calls)
        self.calls = calls
        self.names = call_column(calls, "name").tolist()
        self.families = call_column(calls, "family").tolist()
        self.bytes = call_column(calls, "bytes")
        #: bytes read of those (NaN: unknown), for the roof each call is held to
        self.reads = call_column(calls, "read_bytes")
        #: the biggest argument each reads (NaN: unknown): reads that fit in L2 may come from it
        self.largest = call_column(calls, "largest_read")
        self.device_us = call_column(calls, "device_us")
        #: bytes of the first tensor input (`_out_bytes`), as `join_calls` found them
        first = call_column(calls, "first_input_bytes")
        missing = np.flatnonzero(np.equal(first, None))
        if len(missing):
            first = first.copy()
            first[missing] = [_out_bytes(calls[i]) for i in missing.tolist()]
        self.out = first.astype(np.float64)
        tid = call_column(calls, "tid")
        #: names by code (`distinct_names[name_code[i]]` is calls[i]'s): tests of a name
        #: are made once per name
        self.name_code, self.distinct_names = value_codes(self.names)
        family_code, families = value_codes(self.families)
        #: norms written out as separate ops (`rules.norm_written`), and the calls they
        #: claim: those are the written-out norm finding's, not a chain's, an op row's or
        #: fp32-storage's (one kernel's time in one finding)
        self.norms = norm_written.find(
            norm_written.letters_of(self.distinct_names)[self.name_code], tid, self.out,
            call_column(calls, "seq"), call_column(calls, "backward"),
            call_column(calls, "storage_dtype"),
        )  # fmt: skip
        self.claimed = np.zeros(n, dtype=bool)
        for g in self.norms:
            self.claimed[g.calls] = True
        fusible = (
            call_column(calls, "known")
            & ~self.claimed
            & (
                _holds(families, FUSIBLE_FAMILIES)[family_code]
                | _holds(self.distinct_names, FUSIBLE_NAMES)[self.name_code]
            )
        )
        is_add = self.names_in(ADDS)
        # calls[i] is on calls[i - 1]'s thread over a tensor of the same (nonzero) size
        same = np.zeros(n, dtype=bool)
        same[1:] = (tid[1:] == tid[:-1]) & (self.out[:-1] == self.out[1:]) & (self.out[1:] > 0)
        self.link = same.copy()
        self.link[1:] &= fusible[1:] & fusible[:-1]
        #: calls[i] directly follows a same-size add on its thread (a residual add)
        self.follows_add = same.copy()
        self.follows_add[1:] &= is_add[:-1]
        edges = np.flatnonzero(np.diff(np.concatenate(([False], self.link, [False]))))
        self.starts, self.ends = edges[0::2] - 1, edges[1::2]
        #: in a chain and not its last call: its output is an intermediate
        self.inner = np.zeros(n, dtype=bool)
        self.inner[:-1] = self.link[1:]
        self.member = self.inner | self.link
        #: chains wholly outside the model's forward and backward (`analysis.model_reach`,
        #: from each call's host time `host_ts`): the loop's own (a weight EMA, gradient
        #: clipping), which torch.compile(model) and autocast do not reach; `apart` marks
        #: their calls, the `foreach` finding's (`_loop_chains`), not another's
        self.loop_chain = np.zeros(len(self.starts), dtype=bool)
        self.apart = np.zeros(n, dtype=bool)
        #: each call's host start time, where known (`_host_ts`)
        self.host_ts = host_ts
        #: calls outside the model (`model_reach.outside_model`; all False without host times)
        self.outside = np.zeros(n, dtype=bool)
        if host_ts is not None and len(self.starts):
            self._find_loop_chains(
                *model_reach.outside_model(
                    call_column(calls, "seq"), call_column(calls, "backward"), host_ts
                )
            )
        #: the calls another finding holds: a written-out norm's or a loop chain's
        self.taken = self.claimed | self.apart

    def _find_loop_chains(self, outside: np.ndarray, passes: np.ndarray) -> None:
        """`loop_chain` and `apart` from `model_reach.outside_model`'s columns: a chain is
        the loop's when every call of it is outside the model and chains of the same ops
        are outside after two backward passes or more (after the one, where the trace has
        one): the last forward of a trace whose backward it did not record looks outside
        too, after its last pass only."""
        self.outside = outside
        inside = np.concatenate(([0], np.cumsum(~outside)))
        out = np.flatnonzero(inside[self.ends] == inside[self.starts])
        if not len(out):
            return
        starts, ends = self.starts[out].tolist(), self.ends[out].tolist()
        pattern = [tuple(self.name_code[s:e].tolist()) for s, e in zip(starts, ends, strict=True)]
        seen: dict[tuple, set] = {}
        for p, s in zip(pattern, starts, strict=True):
            seen.setdefault(p, set()).add(int(passes[s]))
        wanted = min(2, len(np.unique(passes)))
        for k, p, s, e in zip(out.tolist(), pattern, starts, ends, strict=True):
            if len(seen[p]) >= wanted:
                self.loop_chain[k] = True
                self.apart[s:e] = True

    def loop_calls(self, ks: np.ndarray) -> np.ndarray:
        """Mask of the calls of loop chains `ks` (indexes into `starts`) and of the calls
        outside the model that run between two of them (an EMA's `copy_` of each result
        back into its tensor: a copy, in no chain)."""
        mine = np.zeros(len(self.calls), dtype=bool)
        for s, e in zip(self.starts[ks].tolist(), self.ends[ks].tolist(), strict=True):
            mine[s:e] = True
        out = np.flatnonzero(self.outside)
        if len(out) > 2:
            m = mine[out]
            between = np.zeros(len(out), dtype=bool)
            between[1:-1] = m[:-2] & m[2:] & ~m[1:-1]
            mine[out[between]] = True
        return mine

    def names_in(self, names) -> np.ndarray:
        """Which calls' names are in `names`."""
        return _holds(self.distinct_names, names)[self.name_code]


def _holds(values: list, wanted) -> np.ndarray:
    """Which of `values` are in `wanted`."""
    return np.array([v in wanted for v in values], dtype=bool)


def _columns_of(ctx) -> _Columns:
    """`_Columns(ctx.calls)`, built once per analysis and kept on it (memory-bound-op,
    unfused-chain and fp32-storage all read them)."""
    cols = getattr(ctx, "_memory_columns", None)
    if cols is None or cols.calls is not ctx.calls:
        cols = ctx._memory_columns = _Columns(ctx.calls, _host_ts(ctx))
    return cols


def _host_ts(ctx) -> np.ndarray | None:
    """Host start time of each of `ctx.calls`, read from the trace they came from (the ops
    pass's, else the timeline's); None where that trace is not at hand."""
    trace = getattr(ctx, "op_trace", None) or getattr(ctx, "trace", None)
    cpu = getattr(trace, "cpu", None)
    if cpu is None or not len(ctx.calls):
        return None
    index = call_column(ctx.calls, "cpu_index")
    if index.max() >= len(cpu):
        return None
    return cpu.ts[index]


def _after_residual_add(cols: _Columns) -> set[str]:
    """Names of the norm ops that at least once directly follow a residual add."""
    names = {cols.names[i] for i in np.flatnonzero(cols.follows_add).tolist()}
    return {n for n in names if op_family(n) in NORMS}


def _out_bytes(call) -> float:
    """Bytes of the call's first tensor input (same-size links of a chain): found once per
    interned shape by `join_calls`; computed here for calls built without it."""
    if call.first_input_bytes is not None:
        return call.first_input_bytes
    return first_input_bytes(call.dims, call.storage_dtype, call.dtypes)


@rule("unfused-chain")
def unfused_chain(ctx):
    """Consecutive memory-bound ops whose intermediates round-trip through HBM.

    Chains are runs of consecutive op calls (in kernel order, same host thread) of fusible
    families (elementwise, activation, dropout, norm) over tensors of the same size. Each
    link writes its output to HBM and the next op reads it back: intermediate bytes =
    2 × output bytes of every op but the last. Time lost per step = Σ intermediate bytes ÷
    memory bandwidth (measured ceiling, each link's memory roof as its op was placed: L2's
    where its call fits in L2; else the chain's own achieved bandwidth) ÷ steps, less the
    share of the intermediate bytes in chains through a norm that holds statistics
    (`STATS_NORMS`: a training BatchNorm, a GroupNorm), `stats_norm_share`: fused, such a
    norm reads its input twice (a reduction, then the normalizing pass), so its chain's round
    trips are traded, not removed. The compiled ResNet-50 and DDPM U-Net kept 90% and 84% of
    their memory-bound bytes where the chains counted a third as gone (H100, 2026-12-07,
    `tests/analysis/test_compiled_resnet50.py`). Chains the training loop runs outside the
    model (`_Columns.loop_chain`) are a finding of their own (`_loop_chains`).
    """
    cols = _columns_of(ctx)
    written = _written_norms(ctx, cols)
    loop = _loop_chains(ctx, cols)
    model = ~cols.loop_chain
    if not model.any():
        return loop + written
    starts, ends = cols.starts[model], cols.ends[model]
    bounds = list(zip(starts.tolist(), ends.tolist(), strict=True))
    member = cols.member & ~cols.apart
    bw = _bandwidth(ctx)
    twice = (cols.out * 2).tolist()
    per_chain = [sum(twice[s : e - 1]) for s, e in bounds]
    inter_bytes = sum(per_chain)
    if not bw:
        moved = sum(cols.bytes[member].tolist())
        time_s = sum(cols.device_us[member].tolist()) * 1e-6
        bw = moved / time_s if time_s else 0.0
    if not bw:
        return loop + written
    inner = np.flatnonzero(cols.inner & ~cols.apart)
    roof = _call_roofs(ctx, cols, inner) if _bandwidth(ctx) else None
    if roof is None:
        lost = ctx.per_op_step(inter_bytes / bw * 1e3)
    else:
        seconds = sum((cols.out[inner] * 2 / roof).tolist())
        lost = ctx.per_op_step(seconds * 1e3)
    names = cols.names
    # the round trips of chains through a norm that must hold its statistics before it
    # normalizes are traded, once fused, for a second read of its input: not saved
    stats = sum(
        b for b, (s, e) in zip(per_chain, bounds, strict=True) if _holds_stats_norm(names[s:e])
    )
    stats_share = stats / inter_bytes if inter_bytes > 0 else 0.0
    lost *= 1.0 - stats_share
    limited = host_limited(ctx.timing)
    patterns = Counter(" → ".join(names[s:e]) for s, e in bounds)
    top, count = patterns.most_common(1)[0]
    calls = cols.calls
    members = {names[i] for i in np.flatnonzero(member).tolist()}
    evidence = {
        "chains_per_step": ctx.per_op_step(len(bounds)),
        "top_chain": top,
        "top_chain_per_step": ctx.per_op_step(count),
        "intermediate_bytes_per_step": ctx.per_op_step(inter_bytes),
        "stats_norm_share": round(stats_share, 4),
        "bandwidth_gb_s": bw / 1e9,
        # no headroom on the host: membound's norm kernels are not the remedy
        "host_limited": limited is not None,
    }
    replayed = norm_whatif.of(ctx)
    if replayed is not None and any(op_family(n) in NORMS for n in members):
        # the replay decides (this chain's remedy is fused_add_norm), not the overhead rule
        saving = replayed["fused_add_norm_ms_per_step"]
        limited = Replayed(saving) if saving <= 0 else None
        evidence["host_limited"] = limited is not None
        evidence["norm_whatif"] = replayed
    return (
        [
            ctx.finding(
                code="unfused-chain",
                title=f"unfused chains of memory-bound ops round-trip HBM ({top})",
                lost_ms=lost,
                evidence=evidence,
                fix=chain_fix(
                    members, bool((cols.link & cols.follows_add & ~cols.apart).any()), limited
                ),
                spans=[
                    (calls[s].first_kernel_us, calls[e - 1].last_kernel_end_us)
                    for s, e in bounds[:2000]
                ],
            )
        ]
        + loop
        + written
    )


#: the `op_family` families of norms that reduce a tensor to statistics before they normalize
#: it (a training BatchNorm, any GroupNorm; forward and backward): fused, such a norm reads
#: its input twice
STATS_NORMS = ("batch_norm", "group_norm")


def _holds_stats_norm(names) -> bool:
    """Whether a chain's op names include a `STATS_NORMS` norm (not BatchNorm's inference
    form, which normalizes with its running statistics in one pass)."""
    return any(op_family(n) in STATS_NORMS and "no_training" not in n for n in names)


#: what runs the loop's own per-tensor chains in a few kernels (the `foreach` remedy's)
LOOP_CHAIN_FIX = (
    "These chains run outside the model's forward and backward, once per tensor (a weight "
    "EMA, gradient clipping, a hand-written update): torch.compile(model) and autocast do not "
    "reach them. Run each as one multi-tensor op over the tensor lists "
    "(torch._foreach_lerp_(ema_params, params, 1 - decay) for an EMA; torch.optim's foreach "
    "or fused optimizers for an update), or torch.compile the function that runs them."
)
#: torch.optim's classes that update their parameters as lists (foreach or fused), by the
#: word an optimizer's class name carries (RMSpropTF, AdamP, SGDW...), the longest first
LIST_OPTIMIZERS = (
    ("rmsprop", "torch.optim.RMSprop(..., foreach=True)"),
    ("adamw", "torch.optim.AdamW(..., fused=True)"),
    ("adagrad", "torch.optim.Adagrad(..., fused=True)"),
    ("adam", "torch.optim.Adam(..., fused=True)"),
    ("sgd", "torch.optim.SGD(..., fused=True)"),
)


def optimizer_loop_fix(cls: str) -> str:
    """What updates the parameters of optimizer class `cls` as lists, not one by one."""
    name = cls.lower()
    alike = next((api for word, api in LIST_OPTIMIZERS if word in name), None)
    same = (
        f"{alike}, torch.optim's implementation of that kind of update (check that its "
        "details, such as where eps sits, suit yours)"
        if alike
        else "a torch.optim optimizer of the same kind with foreach=True or fused=True"
    )
    return (
        f"{cls}.step updates the parameters one tensor at a time: each elementwise op of the "
        "update is a kernel per parameter, with Python between them, which the GPU waits on. "
        f"Update them as lists: {same}; or torch.compile the optimizer's step "
        "(torch.compile(optimizer.step)). torch.compile(model) does not reach it."
    )


#: ... and what fuses the loop's other chains (input preparation, metrics): `compile_loop`
LOOP_CODE_FIX = (
    "These chains run outside the model's forward and backward (the batch's preparation, a "
    "metric): torch.compile(model) does not reach them. Fuse them where they are: "
    "torch.compile the function that runs them, or move the work into the model's forward."
)
#: a chain of the same ops found at least this many times a step outside the model runs once
#: per tensor of a list (an EMA over the parameters: 163 a step on the DDPM U-Net), which a
#: multi-tensor op does in one pass; fewer is the loop's own code (a batch normalized on the
#: GPU: once a step)
PER_TENSOR_CHAINS = 4


def _loop_chains(ctx, cols: _Columns) -> list:
    """`unfused-chain` of the chains the training loop runs outside the model
    (`_Columns.loop_chain`, `analysis.model_reach`): one finding for those an optimizer's step
    repeats over its parameters (a hand-written update's loop, inside torch.optim's step
    annotation: `optimizer_whatif.step_class_at`; the `foreach_optimizer` remedy), one for the
    loop's other chains repeated over a list of tensors (`PER_TENSOR_CHAINS`: an EMA; the
    `foreach` remedy), one for the rest (the `compile_loop` remedy). An EfficientNet-B0 under
    timm's recipe (H100, 2026-12-06) ran both an EMA and RMSpropTF as loops; one foreach lerp
    saved 17.18 ms/step, torch's foreach RMSprop 20.98: two fixes, each its own finding."""
    bw = _bandwidth(ctx)
    if not cols.loop_chain.any() or not bw:
        return []
    ks = np.flatnonzero(cols.loop_chain)
    pattern = [tuple(cols.name_code[cols.starts[k] : cols.ends[k]].tolist()) for k in ks.tolist()]
    counts = Counter(pattern)
    many = np.array([ctx.per_op_step(counts[p]) >= PER_TENSOR_CHAINS for p in pattern])
    owner = np.full(len(ks), "", dtype=object)
    if cols.host_ts is not None:
        owner = optimizer_whatif.step_class_at(ctx, cols.host_ts[cols.starts[ks]])
    stepped = many & (owner != "")
    out = []
    for cls in sorted(set(owner[stepped].tolist())):
        chosen = ks[stepped & (owner == cls)]
        out += _loop_chain_finding(ctx, cols, chosen, True, bw, optimizer=cls)
    for per_tensor in (True, False):
        chosen = ks[(many == per_tensor) & ~stepped]
        if len(chosen):
            out += _loop_chain_finding(ctx, cols, chosen, per_tensor, bw)
    return out


def _loop_chain_finding(
    ctx, cols: _Columns, ks: np.ndarray, per_tensor: bool, bw: float, optimizer: str = ""
):
    """The finding of loop chains `ks` (indexes into `cols.starts`). One pass does each
    chain's work (a multi-tensor op over a list, or one fused kernel), so what it saves is
    their whole time beyond that pass: time lost per step = Σ (device time of their calls −
    their bytes less the intermediates (2 × each inner link's output), at each call's memory
    roof) ÷ steps, plus the GPU's wait for the host while it issued them
    (`loop_idle_ms`). DDPM's per-parameter EMA, 163 `mul_ → add_` a step, ran while the GPU
    was busy: 0.90 predicted, 0.82 saved by one `torch._foreach_lerp_` (H100, 2026-12-06).
    A ConvNeXt's ModelEmaV2 loop, 182 `copy_(d * e + (1 - d) * m)` a step, ran after the
    GradScaler's sync with the GPU idle: 8.46 predicted, 11.70 saved (H100, 2026-12-06).
    `optimizer`: the class of the optimizer whose step runs the chains (its update written
    as a loop over the parameters), '' the loop's own."""
    bounds = list(zip(cols.starts[ks].tolist(), cols.ends[ks].tolist(), strict=True))
    idx = np.concatenate([np.arange(s, e) for s, e in bounds])
    left = cols.bytes[idx] - np.where(cols.inner[idx], 2 * cols.out[idx], 0.0)
    left = np.where(left > 0.0, left, 0.0)
    roof = _call_roofs(ctx, cols, idx)
    fused_ms = _total(left / (bw if roof is None else roof)) * 1e3
    device_ms = _total(cols.device_us[idx]) / 1e3
    gpu_ms = ctx.per_op_step(max(device_ms - fused_ms, 0.0))
    idle = loop_idle_ms(ctx, cols, ks)
    lost = gpu_ms + sum(idle.values())
    if not lost > 0.0:
        return []
    names = cols.names
    top, count = Counter(" → ".join(names[s:e]) for s, e in bounds).most_common(1)[0]
    calls = cols.calls
    n = ctx.per_op_step(len(bounds))
    chains = f"{top}, {n:.0f} chain{'s' if n != 1 else ''} per step"
    if optimizer:
        title = (
            f"the optimizer ({optimizer}) updates its parameters one tensor at a time ({chains})"
        )
        fix = optimizer_loop_fix(optimizer)
    else:
        what = "once per tensor" if per_tensor else "in its own code"
        title = f"the training loop runs elementwise chains {what}, outside the model ({chains})"
        fix = LOOP_CHAIN_FIX if per_tensor else LOOP_CODE_FIX
    return [
        ctx.finding(
            code="unfused-chain",
            title=title,
            lost_ms=lost,
            evidence={
                "outside_model": True,
                "per_tensor": per_tensor,
                **({"optimizer_loop": optimizer} if optimizer else {}),
                "chains_per_step": n,
                "top_chain": top,
                "top_chain_per_step": ctx.per_op_step(count),
                "calls_per_step": ctx.per_op_step(len(idx)),
                "device_ms_per_step": ctx.per_op_step(device_ms),
                "fused_ms_per_step": ctx.per_op_step(fused_ms),
                "bytes_per_step": ctx.per_op_step(_total(left)),
                "gpu_ms_per_step": gpu_ms,
                # the GPU's wait for the host while it issued this work, by idle cause
                "gpu_idle_before_ms_per_step": idle,
            },
            fix=fix,
            spans=[
                (calls[s].first_kernel_us, calls[e - 1].last_kernel_end_us)
                for s, e in bounds[:2000]
            ],
        )
    ]


#: the idle causes in which the GPU waits for the host to issue a loop's work: launching
#: it, in Python between its ops (`other`), in its device-to-device copy calls (`copy`)
LOOP_IDLE_CAUSES = ("launch", "other", "copy")


def loop_idle_ms(ctx, cols: _Columns, ks: np.ndarray | None = None) -> dict[str, float]:
    """ms per step, by cause (`LOOP_IDLE_CAUSES`), of the GPU's idle in the gaps that end
    with work of the loop chains `ks` (all loop chains: None) or the copies between them
    (`_Columns.loop_calls`), the timeline pass's activities mapped to the calls
    (`analysis.kernel_map`): the GPU waiting while the host issued the loop's work, which
    one multi-tensor op (or compiling the loop) leaves nearly none of. {} where nothing maps."""
    return {c: v for c, v in _loop_idle(ctx, cols, ks, LOOP_IDLE_CAUSES).items() if v > 0}


def _loop_idle(ctx, cols: _Columns, ks: np.ndarray | None, causes) -> dict[str, float]:
    """`kernel_map.idle_before` of `causes` for the calls of loop chains `ks` (None: all)."""
    if ks is None:
        ks = np.flatnonzero(cols.loop_chain)
    if not len(ks):
        return {}
    return kernel_map.idle_before(ctx, causes, cols.loop_calls(ks))


_NORM_KIND = {"rms_norm": "RMSNorm", "layer_norm": "LayerNorm"}


def _fused_ms(ctx, nbytes: float, bw: float) -> float:
    """Time of a fused kernel moving `nbytes` at the roof such a call is held to."""
    if not nbytes > 0:
        return 0.0
    c = ctx.ceilings
    rate = call_memory_roof(c, nbytes, "norm")[1] if c is not None else bw
    return nbytes / rate * 1e3


def _written_norm_fused_ms(ctx, cols: _Columns, bw: float) -> list[float]:
    """Per written-out norm of `cols.norms`, the ms one fused kernel each way would take."""
    return [sum(_fused_ms(ctx, b, bw) for b in norm_written.fused_bytes(g)) for g in cols.norms]


def written_norm_launch_ms(ctx, cause: str = "launch") -> float:
    """ms per step of the step's `cause` idle that fusing the written-out norms removes: the
    share of op kernels their fusion takes away (`rules.norm_written`). Of `launch`, the
    gaps the host left; `launch-bound` keeps the rest. Of `queued`, the GPU's own turnaround
    between kernels (`analysis.timeline`): a kernel that is gone takes its boundary with it.
    0 without written-out norms or ceilings (no finding then)."""
    if not _bandwidth(ctx):
        return 0.0
    cols = _columns_of(ctx)
    if not cols.norms:
        return 0.0
    kernels = call_column(cols.calls, "kernels")
    total = float(np.sum(kernels))
    removed = float(np.sum(kernels[cols.claimed])) - sum(
        norm_written.fused_kernels(g) for g in cols.norms
    )
    if not total > 0 or not removed > 0:
        return 0.0
    return ctx.idle_ms_per_step(cause) * min(removed / total, 1.0)


def _written_norms(ctx, cols: _Columns) -> list:
    """`unfused-chain` for norms written out as separate ops (`rules.norm_written`): time
    lost per step = Σ (device time of their forward and backward ops − one fused kernel's
    time each way at the memory roof) ÷ steps, plus the launch gaps and the GPU's turnaround
    of the kernels fusing removes (`written_norm_launch_ms`)."""
    bw = _bandwidth(ctx)
    if not cols.norms or not bw:
        return []
    fused = _written_norm_fused_ms(ctx, cols, bw)
    device = [float(np.sum(cols.device_us[g.calls])) / 1e3 for g in cols.norms]
    gpu_total = sum(max(d - f, 0.0) for d, f in zip(device, fused, strict=True))
    if not gpu_total > 0.0:
        return []
    launch_ms = written_norm_launch_ms(ctx)
    turnaround_ms = written_norm_launch_ms(ctx, "queued")
    kinds = Counter(g.kind for g in cols.norms)
    kind = kinds.most_common(1)[0][0]
    label = _NORM_KIND[kind]
    first = cols.norms[0]
    ops = " → ".join(cols.names[i] for i in first.forward)
    with_bwd = sum(1 for g in cols.norms if g.backward)
    per_norm_calls = sum(len(g.calls) for g in cols.norms) / len(cols.norms)
    return [
        ctx.finding(
            code="unfused-chain",
            title=(
                f"{label} written out as {len(first.forward)} ops ({ops}), "
                f"{ctx.per_op_step(len(cols.norms)):.0f} per step"
            ),
            lost_ms=ctx.per_op_step(gpu_total) + launch_ms + turnaround_ms,
            evidence={
                "norm_written_out": kind,
                "gpu_ms_per_step": ctx.per_op_step(gpu_total),
                "launch_gaps_ms_per_step": launch_ms,
                "turnaround_ms_per_step": turnaround_ms,
                "norms_per_step": ctx.per_op_step(len(cols.norms)),
                "top_chain": ops,
                "ops_per_norm": per_norm_calls,
                "backward_found": with_bwd == len(cols.norms),
                "device_ms_per_step": ctx.per_op_step(sum(device)),
                "fused_ms_per_step": ctx.per_op_step(sum(fused)),
                "input_bytes": first.input_bytes,
                "kinds": dict(kinds),
            },
            fix=(
                f"One fused {label} kernel each way moves the activation a few times instead of "
                f"once per op: membound.swap_norms(model) swaps such modules (recognised by what "
                f"they compute, e.g. HF's LlamaRMSNorm) for membound.nn.Fused{label}, checked "
                f"numerically first; where the residual add comes right before it, "
                f"membound.nn.FusedAdd{label} in the block fuses the add too; torch.compile "
                f"also fuses the written-out ops."
            ),
            spans=[
                (
                    cols.calls[g.forward[0]].first_kernel_us,
                    cols.calls[g.forward[-1]].last_kernel_end_us,
                )
                for g in cols.norms[:2000]
            ],
        )
    ]


@rule("fp32-storage")
def fp32_storage(ctx):
    """Memory-bound ops moving fp32 tensors, where 16-bit storage halves the bytes.

    Time lost per step = ½ × Σ over memory-bound op calls whose *storage* dtype is fp32 of
    (minimal bytes ÷ the call's memory roof, as its op was placed), ÷ steps: the half of the time at the roof
    that bf16 storage removes (compute dtype does not matter for a memory-bound op). The
    storage dtype is that of the op's largest tensor input (`OpCall.storage_dtype`): a bf16
    `native_layer_norm_backward` reads fp32 mean/rstd statistics, which does not make its
    data fp32. The time above the roof is `memory-bound-op`'s, and the intermediates of an
    unfused chain (2 × each link's output) are `unfused-chain`'s: they are left out here, so
    no byte is counted by two findings and the findings add up to the saving of both fixes.
    """
    bw = _bandwidth(ctx)
    if not bw:
        return []
    memory_ops = {name for name, r in _rows_by_name(ctx).items() if r.bound == "memory"}
    cols = _columns_of(ctx)
    fp32 = (
        call_column(cols.calls, "known")
        & np.equal(call_column(cols.calls, "storage_dtype"), "float")
        & cols.names_in(memory_ops)
        # a written-out norm's calls (its fused kernel's bytes count below), a loop chain's
        # (autocast does not reach them)
        & ~cols.taken
    )
    idx = np.flatnonzero(fp32)
    # the intermediates of unfused chains are `unfused-chain`'s: fusing removes them, so bf16
    # halves only the rest (the two findings add up to the saving of doing both)
    chained = np.where(cols.inner[idx], 2 * cols.out[idx], 0.0)
    left = cols.bytes[idx] - chained
    mine = np.where(0.0 > left, 0.0, left)  # max(left, 0.0), NaN kept as max keeps it
    roof = _call_roofs(ctx, cols, idx)
    # running sums in call order (cumsum adds one by one, as `+=` in a loop does)
    excluded = _total(cols.bytes[idx] - mine)
    nbytes = _total(mine)
    seconds = _total(mine / (bw if roof is None else roof))
    # op -> its ms, in order of first call (what most_common breaks ties by)
    which = cols.name_code[idx]
    ms = np.bincount(which, weights=cols.device_us[idx] / 1e3).tolist()
    seen, first = np.unique(which, return_index=True)
    ops = Counter({cols.distinct_names[k]: ms[k] for k in seen[np.argsort(first)].tolist()})
    # a written-out fp32 norm, fused, still moves fp32: half its fused kernel's time is this
    # finding's (the rest of its ops' time is the written-out norm's)
    fused = _written_norm_fused_ms(ctx, cols, bw) if cols.norms else []
    norm_ms = sum(f for g, f in zip(cols.norms, fused, strict=True) if g.fp32)
    nbytes += sum(sum(norm_written.fused_bytes(g)) for g in cols.norms if g.fp32)
    if not nbytes:
        return []
    lost = ctx.per_op_step(0.5 * (seconds * 1e3 + norm_ms))
    autocast = _autocast_on(ctx.rows)
    alone = _bf16_storage_alone_ms(ctx, cols, idx, norm_ms) if autocast else None
    return [
        ctx.finding(
            code="fp32-storage",
            title="memory-bound ops move fp32 tensors; bf16 storage would halve their bytes",
            lost_ms=lost,
            evidence={
                "fp32_bytes_per_step": ctx.per_op_step(nbytes),
                "chain_intermediate_bytes_left_to_unfused_chain_per_step": ctx.per_op_step(
                    excluded
                ),
                "ops": {k: round(ctx.per_op_step(v), 4) for k, v in ops.most_common(5)},
                "memory_bandwidth_gb_s": bw / 1e9,
                "autocast_on": autocast,
                **({} if alone is None else {"saving_alone_ms_per_step": alone}),
            },
            fix=FP32_STORAGE_FIX_AUTOCAST if autocast else FP32_STORAGE_FIX,
        )
    ]


#: dtypes a cast between fp32 and 16-bit storage moves (`OpCall.dtypes` names)
_FLOAT_DTYPES = frozenset(("float", "c10::BFloat16", "c10::Half"))


def _bf16_storage_alone_ms(ctx, cols, idx: np.ndarray, norm_ms: float) -> float:
    """What 16-bit storage saves applied alone where autocast is on (ms/step): half the
    device time of the fp32 memory-bound calls that are not casts (an op below its roof
    stays as far below it in bf16, so its whole time halves, not only its time at the roof)
    and all the time of the casts between fp32 and 16 bits (autocast's weight casts each
    forward, the gradient casts back, the logits' cast for the loss), which a bf16 model
    does not make. This counts time `memory-bound-op` and `unfused-chain` also claim: it is
    the `bf16_storage` remedy's figure (`remedies.py`), not the finding's. Eager GPT-2 on
    the H200 (2026-12-02, bench_truth --fixes bf16-weights): 12.3 + 19.6 ms/step of it;
    bf16 weights with fp32 master weights saved 27.78 (the finding: 6.78)."""
    # a copy_ between two float dtypes (its destination's and its source's); _to_copy records
    # only its input's dtype: a cast when its copy_ child is one (counted there)
    codes, distinct = value_codes(call_column(cols.calls, "dtypes"))
    two = [[t for t in (d or ())[:2] if t in _FLOAT_DTYPES] for d in distinct]
    mixed = np.array([len(d) == 2 and d[0] != d[1] for d in two], dtype=bool)
    cast = (call_column(cols.calls, "name") == "aten::copy_") & mixed[codes]
    us = cols.device_us
    half = 0.5 * float(us[idx][~cast[idx]].sum()) / 1e3
    return ctx.per_op_step(half + float(us[cast].sum()) / 1e3 + 0.5 * norm_ms)


def _total(values: np.ndarray) -> float:
    """0.0 + values[0] + values[1] + ..., added in order."""
    return float(np.cumsum(np.concatenate(([0.0], values)))[-1])


FP32_STORAGE_FIX = (
    "Store activations/weights in bf16: torch.autocast('cuda', dtype=torch.bfloat16) "
    "for the forward pass, or model.to(torch.bfloat16) with fp32 master weights in "
    "the optimizer; fp16 math on fp32 storage does not help a memory-bound op."
)
FP32_STORAGE_FIX_AUTOCAST = (
    "Autocast is already on (the matmuls run in 16 bits): these fp32 bytes are what it keeps "
    "in fp32 (norms, softmax and loss, the residual stream, fp32 gradients, the casts of the "
    "fp32 weights). Halving them takes 16-bit storage: model.to(torch.bfloat16) with fp32 "
    "master weights in the optimizer; torch.compile removes the casts' own round trips."
)
#: op families whose compute dtype shows what autocast does
_TENSOR_CORE_FAMILIES = ("matmul", "conv", "attention")


def _autocast_on(rows) -> bool:
    """16-bit matmul/conv/attention work next to fp32 memory-bound work: autocast (or a
    16-bit model) already runs the tensor-core ops in 16 bits."""
    return any(
        r.compute in ("bf16", "fp16") and op_family(r.name) in _TENSOR_CORE_FAMILIES for r in rows
    )


def loop_launch_ms(ctx, cause: str = "launch") -> float:
    """ms per step of the `cause` idle (`launch`, `other`) before the loop chains' work
    (`loop_idle_ms`): the loop-chain findings', so `launch-bound` (`host-bound`) leaves it
    out. 0 without ceilings (no finding then) or loop chains."""
    if not _bandwidth(ctx):
        return 0.0
    return _loop_idle(ctx, _columns_of(ctx), None, (cause,)).get(cause, 0.0)
