"""`memory-bound-op`, summed: the many memory-bound ops that each take too small a share of
GPU time for a finding of their own, but together run well below their roof.

Why (issue 15, H200 truth runs): in an eager GPT-2 loop no single memory-bound op reached
`MEMORY_OP_SHARE` of kernel time, so no finding stood for the ~26 ms/step those ops spent
above their roofs (LayerNorm backward at 29% of its roof, the bias-gradient sums at 34%, the
autocast casts at 63%, ...). `torch.compile` saved 27 ms/step there, and membound's
prediction for it was 7 ms: it had only the fused chains' intermediates and the launch gaps.
What a code generator recovers is each op's time above its own roof (its bytes, moved at the
measured rate), besides the intermediates of the chains it fuses (`unfused-chain`) and the
launch gaps (`launch-bound`): disjoint parts of the same kernels, so nothing counts twice.
"""

from __future__ import annotations

from membound.analysis.fixes import op_family

#: families a code generator does not rewrite (library kernels, membound's or inductor's own
#: kernels, the optimizer's: those have remedies of their own) or whose bytes it cannot move
#: faster: left out of the sum
NOT_GENERATED = ("matmul", "attention", "conv", "inductor", "optimizer", "rnn")
#: ops shown in the evidence
SHOWN = 6


#: a call whose bytes take less than this at the memory roof (µs) cannot approach the roof:
#: a kernel's fixed cost (launch, ramp-up, tail) is a few µs, so its time is latency (shared
#: with rules/memory.py, which imports it from here)
LATENCY_US = 2.0


def attainable_ms(r, bw: float) -> float:
    """A row's time at its memory roof: the one its placement chose (`OpRow.memory_roof`),
    else HBM's."""
    return r.attainable_ms if r.attainable_ms is not None else r.bytes / bw * 1e3


def memory_ops_below_roof(ctx, bw: float, own: set[str], claimed: dict | None = None):
    """The memory-bound ops without a finding of their own, summed: time lost per step =
    Σ (device time − time at the memory roof) ÷ steps, over the op rows bound by memory whose
    calls are large enough to be bandwidth-bound (≥ `LATENCY_US` at HBM's rate per call), of
    families a code generator rewrites. One finding (its evidence lists the largest), whose
    remedy is `torch.compile`. `own`: the rows with a finding of their own (left out);
    `claimed`: op name -> (device ms, ms at the roof) of calls another finding holds (a
    written-out norm's), taken out of their rows; called by rules/memory.py's
    `memory_bound_op` (one rule per finding code)."""
    claimed = claimed or {}
    gaps: dict[str, float] = {}
    device = 0.0
    for r in ctx.rows:
        if r.bound != "memory" or not r.exact_cost or r.name in own:
            continue
        if op_family(r.name) in NOT_GENERATED or r.name.startswith("membound::"):
            continue
        if r.bytes / bw / max(r.calls, 1) * 1e6 < LATENCY_US:
            continue  # latency-sized calls: launch-bound's to report
        taken_ms, taken_roof_ms = claimed.get(r.name, (0.0, 0.0))
        gap = (r.device_ms - taken_ms) - (attainable_ms(r, bw) - taken_roof_ms)
        if gap > 0:
            gaps[r.name] = gap
            device += r.device_ms - taken_ms
    if len(gaps) < 2:  # one op alone is not a sum: its share decided that it is no finding
        return []
    lost = ctx.per_op_step(sum(gaps.values()))
    top = sorted(gaps.items(), key=lambda kv: -kv[1])
    names = ", ".join(n for n, _ in top[:3])
    return [
        ctx.finding(
            code="memory-bound-op",
            title=(
                f"{len(gaps)} memory-bound ops run below their roof, each a small share of "
                f"GPU time ({names}, ...)"
            ),
            lost_ms=lost,
            evidence={
                "ops_below_roof": {n: round(ctx.per_op_step(v), 4) for n, v in top[:SHOWN]},
                "op_count": len(gaps),
                "device_ms_per_step": ctx.per_op_step(device),
                "memory_bandwidth_gb_s": bw / 1e9,
            },
            fix=(
                "Let a code generator write these kernels: torch.compile(model) fuses "
                "elementwise ops, norms, reductions and dtype casts into fewer kernels that run "
                "near the memory roof (its saving here adds the unfused chains' and launch "
                "gaps' findings)."
            ),
        )
    ]
