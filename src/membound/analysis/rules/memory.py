"""HBM-bound work: `memory-bound-op`, `unfused-chain`, `fp32-storage`.

These need the op rows placed on a roofline (ceilings known) and op costs (shapes recorded).
"""

from __future__ import annotations

from collections import Counter

from membound.analysis.findings import rule
from membound.analysis.fixes import NORMS, chain_fix, memory_bound_fix, op_family
from membound.analysis.ops import first_input_bytes
from membound.analysis.roofline import call_memory_roof
from membound.analysis.rules.memory_gap import memory_ops_below_roof

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


def _call_roofs(ctx):
    """call -> bytes/s of the memory roof that call is held to, as its op row was placed
    (`analysis.roofline.call_memory_roof`: L2's for calls whose bytes fit in L2, the write
    rate for fills); None when the ceilings have only the HBM copy rate (every call's)."""
    c = ctx.ceilings
    if c is None or not (getattr(c, "l2_bandwidth", None) or getattr(c, "write_bandwidth", None)):
        return None
    return lambda call: call_memory_roof(c, call.bytes, call.family)[1]


def _attainable_ms(r, bw: float) -> float:
    """A row's time at its memory roof: the one its placement chose (`OpRow.memory_roof`),
    else HBM's."""
    return r.attainable_ms if r.attainable_ms is not None else r.bytes / bw * 1e3


def _rows_by_name(ctx):
    return {r.name: r for r in ctx.rows}


#: an op reaching at least this fraction of its memory roof is near it: the time above the
#: roof is then not worth a finding of its own (only fewer bytes would make it faster)
NEAR_ROOF = 0.6
#: a call whose bytes take less than this at the memory roof (µs) cannot approach the roof:
#: a kernel's fixed cost (launch, ramp-up, tail) is a few µs, so its time is latency
LATENCY_US = 2.0


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
    after_add = _after_residual_add(ctx.calls)
    out = []
    for r in ctx.rows:
        if r.bound != "memory" or r.share_of_gpu_time < MEMORY_OP_SHARE:
            continue
        if r.fraction_of_attainable is not None and r.fraction_of_attainable >= NEAR_ROOF:
            continue
        attainable_ms = _attainable_ms(r, bw)
        if attainable_ms / max(r.calls, 1) * 1e3 < LATENCY_US:
            continue  # kilobyte-sized calls: latency, not bandwidth (launch-bound's to report)
        lost = ctx.per_op_step(max(r.device_ms - attainable_ms, 0.0))
        out.append(
            ctx.finding(
                code="memory-bound-op",
                title=f"{r.name} is memory-bound and takes {r.share_of_gpu_time:.0%} of GPU time",
                lost_ms=lost,
                evidence={
                    "op": r.name,
                    "calls_per_step": ctx.per_op_step(r.calls),
                    "device_ms_per_step": ctx.per_op_step(r.device_ms),
                    "bytes_per_step": ctx.per_op_step(r.bytes),
                    "arithmetic_intensity": r.arithmetic_intensity,
                    "achieved_bandwidth_fraction": r.achieved_bandwidth_fraction,
                    "memory_roof": r.memory_roof,
                    "share_of_gpu_time": r.share_of_gpu_time,
                    "attainable_ms_per_step": ctx.per_op_step(attainable_ms),
                    "dtypes": r.dtypes,
                },
                fix=memory_bound_fix(r.name, r.name in after_add),
            )
        )
    own = {f.evidence["op"] for f in out}
    return out + memory_ops_below_roof(ctx, bw, own, LATENCY_US)


ADDS = ("aten::add", "aten::add_")


def _chains(calls) -> list[list]:
    """Runs of consecutive fusible calls on one thread over tensors of the same size."""
    chains: list[list] = []
    cur: list = []
    for c in calls:
        if (
            _fusible(c)
            and cur
            and cur[-1].tid == c.tid
            and _out_bytes(cur[-1]) == _out_bytes(c) > 0
        ):
            cur.append(c)
            continue
        if len(cur) >= 2:
            chains.append(cur)
        cur = [c] if _fusible(c) else []
    if len(cur) >= 2:
        chains.append(cur)
    return chains


def _chains_of(ctx) -> list[list]:
    """`_chains(ctx.calls)`, found once per analysis and kept on it (unfused-chain and
    fp32-storage both use them)."""
    chains = getattr(ctx, "_memory_chains", None)
    if chains is None:
        chains = ctx._memory_chains = _chains(ctx.calls)
    return chains


def _intermediate_bytes(chain) -> dict[int, float]:
    """Per call (by id) of a chain: the bytes of its output written to HBM and read back by
    the next call (2 x its output), which fusing the chain removes."""
    return {id(c): 2 * _out_bytes(c) for c in chain[:-1]}


def _follows_add(calls, i: int) -> bool:
    """Whether calls[i] directly follows a same-size add on its thread (a residual add)."""
    prev, cur = calls[i - 1], calls[i]
    return prev.name in ADDS and prev.tid == cur.tid and _out_bytes(prev) == _out_bytes(cur) > 0


def _after_residual_add(calls) -> set[str]:
    """Names of the norm ops that at least once directly follow a residual add."""
    return {
        c.name
        for i, c in enumerate(calls)
        if i and op_family(c.name) in NORMS and _follows_add(calls, i)
    }


def _fusible(call) -> bool:
    return call.known and (call.family in FUSIBLE_FAMILIES or call.name in FUSIBLE_NAMES)


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
    where its call fits in L2; else the chain's own achieved bandwidth) ÷ steps.
    """
    chains = _chains_of(ctx)
    if not chains:
        return []
    bw = _bandwidth(ctx)
    inter_bytes = sum(sum(_out_bytes(c) * 2 for c in ch[:-1]) for ch in chains)
    if not bw:
        moved = sum(c.bytes for ch in chains for c in ch)
        time_s = sum(c.device_us for ch in chains for c in ch) * 1e-6
        bw = moved / time_s if time_s else 0.0
    if not bw:
        return []
    roof = _call_roofs(ctx) if _bandwidth(ctx) else None
    if roof is None:
        lost = ctx.per_op_step(inter_bytes / bw * 1e3)
    else:
        seconds = sum(_out_bytes(c) * 2 / roof(c) for ch in chains for c in ch[:-1])
        lost = ctx.per_op_step(seconds * 1e3)
    patterns = Counter(" → ".join(c.name for c in ch) for ch in chains)
    top, count = patterns.most_common(1)[0]
    return [
        ctx.finding(
            code="unfused-chain",
            title=f"unfused chains of memory-bound ops round-trip HBM ({top})",
            lost_ms=lost,
            evidence={
                "chains_per_step": ctx.per_op_step(len(chains)),
                "top_chain": top,
                "top_chain_per_step": ctx.per_op_step(count),
                "intermediate_bytes_per_step": ctx.per_op_step(inter_bytes),
                "bandwidth_gb_s": bw / 1e9,
            },
            fix=chain_fix(
                {c.name for ch in chains for c in ch},
                any(_follows_add(ch, i) for ch in chains for i in range(1, len(ch))),
            ),
            spans=[(ch[0].first_kernel_us, ch[-1].last_kernel_end_us) for ch in chains[:2000]],
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
    rows = _rows_by_name(ctx)
    # the intermediates of unfused chains are `unfused-chain`'s: fusing removes them, so bf16
    # halves only the rest (the two findings add up to the saving of doing both)
    chained = {k: v for ch in _chains_of(ctx) for k, v in _intermediate_bytes(ch).items()}
    roof = _call_roofs(ctx)
    nbytes = excluded = seconds = 0.0
    ops: Counter = Counter()
    for c in ctx.calls:
        r = rows.get(c.name)
        if r is None or r.bound != "memory" or not c.known or c.storage_dtype != "float":
            continue
        mine = max(c.bytes - chained.get(id(c), 0.0), 0.0)
        excluded += c.bytes - mine
        nbytes += mine
        seconds += mine / (bw if roof is None else roof(c))
        ops[c.name] += c.device_us / 1e3
    if not nbytes:
        return []
    lost = ctx.per_op_step(0.5 * seconds * 1e3)
    autocast = _autocast_on(ctx.rows)
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
            },
            fix=FP32_STORAGE_FIX_AUTOCAST if autocast else FP32_STORAGE_FIX,
        )
    ]


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
