"""`launch-bound`: the host cannot issue kernels as fast as the GPU runs them."""

from __future__ import annotations

import numpy as np

from membound.analysis import intervals as iv
from membound.analysis import kernel_map
from membound.analysis.findings import rule
from membound.analysis.fixes import loop_owner, op_family
from membound.analysis.op_calls import call_column, value_codes
from membound.analysis.rules.host_bound import (
    SHAPES_VARY_FIX,
    backward_syncs,
    mid_step_syncs,
    shapes_vary,
)
from membound.analysis.rules.memory import loop_launch_ms, written_norm_launch_ms
from membound.analysis.rules.memory_gap import NOT_GENERATED
from membound.analysis.timeline import LAUNCH_GAP_US
from membound.cost.formulas.inductor import parse_name
from membound.trace.model import KERNEL

#: what the evidence says about profiler overhead (an unprofiled run loses less)
PROFILER_NOTE = (
    "the profiler adds a few microseconds to every op and launch it records, so this "
    "profiled run overstates the per-launch host cost; time the step without the profiler "
    "to see the real loss"
)


#: the step is compiled code when at least this share of its kernels are inductor's own
#: (`triton_poi_*`, `triton_red_*`, `triton_per_*`, ...): torch.compile is then no remedy
COMPILED_SHARE = 0.2
COMPILED_FIX = (
    "The model is already compiled (inductor wrote most of its kernels), so what is left is "
    "the launches themselves: replay them as CUDA graphs with "
    "torch.compile(model, mode='reduce-overhead') (mark each optimizer step with "
    "torch.compiler.cudagraph_mark_step_begin() under gradient accumulation), or raise the "
    "batch size so each kernel does more."
)


def inside_library_ms(ctx) -> float:
    """ms per step of the `launch` idle between two kernels of one library call (cuDNN,
    cuBLAS, attention, a foreach optimizer op: `rules.memory_gap.NOT_GENERATED`), which
    launches its own kernels one after another: cuDNN's LSTM launches a kernel per layer and
    time step, and on an H100 (2026-12-06, `tests/fixtures/h100_real_lstm_lm_truth1`) 70% of
    the word-language model's launch idle sat inside its `_cudnn_rnn` calls. torch.compile
    keeps such a call as it is (dynamo does not even trace an nn.LSTM), so it cannot shorten
    those gaps; a CUDA graph replays the call's launches and can. 0 where the timeline's
    kernels cannot be mapped to calls (`kernel_map.timeline_calls`)."""
    if not len(ctx.calls):
        return 0.0
    codes, names = value_codes(call_column(ctx.calls, "name"))
    library = np.array([op_family(str(n)) in NOT_GENERATED for n in names], dtype=bool)
    return kernel_map.idle_inside(ctx, "launch", library[codes])


def inductor_share(trace, kernels: np.ndarray) -> float:
    """Share of the kernels selected by the mask `kernels` that inductor generated (their
    names parse as inductor's, `cost.formulas.inductor.parse_name`)."""
    n = int(kernels.sum())
    if not n:
        return 0.0
    codes, counts = np.unique(trace.gpu.name[kernels], return_counts=True)
    mine = [parse_name(trace.names[int(c)]) is not None for c in codes.tolist()]
    return float(counts[np.array(mine, dtype=bool)].sum()) / n


EAGER_FIX = (
    "Issue fewer, larger kernels: torch.compile(model) (fuses elementwise ops and "
    "can use CUDA graphs with mode='reduce-overhead'), capture the step in a CUDA "
    "graph (torch.cuda.graphs), replace ops written out one by one with one module "
    "(membound.swap_norms(model) for norms written out as many ops, as HF's "
    "LlamaRMSNorm), or raise the batch size. Not membound's kernels in place of "
    "ATen's one-kernel LayerNorm: each call costs more host time, which is what "
    "this loop lacks."
)
#: what is left of the compiled fix where `shapes_vary`
SHAPES_VARY_COMPILED = (
    "The model is compiled already: what is left is fewer, larger kernels (a larger batch) "
    "or less host work around them."
)
#: what is left of the eager fix where `shapes_vary`: compile, not graphs
SHAPES_VARY_LAUNCH = (
    "Issue fewer, larger kernels without a graph: torch.compile(model, dynamic=True) fuses "
    "the elementwise ops with their shapes left symbolic, or raise the batch size."
)


@rule("launch-bound")
def launch_bound(ctx):
    """GPU idle while the host is issuing the next kernels slower than the GPU runs them.

    Time lost per step = GPU idle attributed to the timeline cause `launch`, ÷ steps: the
    host inside a launch call, inside an op that launches kernels (dispatcher, autograd,
    allocator), in the short Python glue between two such ops, or a gap shorter than
    `LAUNCH_GAP_US` between two GPU activities whose second was not queued yet (see
    `membound.analysis.timeline`: a gap before work the GPU already had is `queued`, the
    GPU's own turnaround; on the H200 a compiled GPT-2 step's 3000 such gaps made 2-3
    ms/step that launch-bound claimed, where CUDA graphs then saved 0.6-0.8). Evidence:
    kernels per step and their median duration, the mean launch-call time and the host time
    per kernel — many kernels of a few microseconds, each costing tens of microseconds of
    host time, is the signature. The profiler inflates per-launch host cost (evidence note).
    """
    idle = ctx.idle("launch")
    # the gaps of the kernels that fusing written-out norms removes are that finding's
    # (rules/memory.py), and so are those before the loop's own chains (an EMA): one instant
    # in one finding
    to_norms = written_norm_launch_ms(ctx)
    to_loop = loop_launch_ms(ctx)
    lost = ctx.idle_ms_per_step("launch") - to_norms - to_loop
    if lost <= 0:
        return []
    gpu = ctx.trace.gpu
    k = (gpu.kind == KERNEL) & ctx.in_window(gpu.ts)
    n_gaps = len(idle[0])
    tl = ctx.timeline
    calls = getattr(tl, "launch_calls", iv.EMPTY)
    lo, hi = ctx.window
    n_launch = len(iv.clip(calls, lo, hi)[0])
    in_calls = iv.total(iv.intersect(idle, calls))
    kernels = int(k.sum())
    # the steps' `launch` idle is what is left of it once the profiler's share is set aside
    # (`profiler` cause); the idle inside launch calls is read off the profiled timeline, so
    # it is capped at that: the split never shows a negative part
    in_calls_ms = min(ctx.per_step(in_calls / 1e3), lost)
    host_per_kernel = (hi - lo) / kernels if kernels else 0.0
    compiled = inductor_share(ctx.trace, k)
    inside = min(inside_library_ms(ctx), lost)
    evidence = {
        "kernels_per_step": kernels / ctx.n_steps,
        "median_kernel_us": float(np.median(gpu.dur[k])) if k.any() else 0.0,
        "launch_gaps_per_step": n_gaps / ctx.n_steps,
        "mean_gap_us": iv.total(idle) / n_gaps if n_gaps else 0.0,
        "mean_launch_call_us": iv.total(iv.clip(calls, lo, hi)) / n_launch if n_launch else 0.0,
        "host_us_per_kernel": host_per_kernel,
        "gpu_idle_in_launch_calls_ms_per_step": in_calls_ms,
        "gpu_idle_in_op_overhead_ms_per_step": lost - in_calls_ms,
        "short_gap_threshold_us": LAUNCH_GAP_US,
        "left_to_written_out_norms_ms_per_step": to_norms,
        "left_to_loop_chains_ms_per_step": to_loop,
        "note": PROFILER_NOTE,
        "inductor_kernel_share": compiled,
        # the gaps before work the GPU already had: not this finding's (no launch fix
        # shortens them), shown so the reader sees where the rest of the idle went
        "queued_idle_ms_per_step": ctx.idle_ms_per_step("queued"),
        "turnaround_us": getattr(tl, "turnaround_us", 0.0),
        "inside_library_calls_ms_per_step": inside,
        # a whole-step CUDA graph (remedy graph_step) needs none (`rules.host_bound`)
        "mid_step_syncs_per_step": mid_step_syncs(ctx),
        # no CUDA graph of the step at all where an op of the backward syncs
        "backward_syncs_per_step": backward_syncs(ctx),
        # no CUDA graph either where the shapes change from step to step
        "shapes_vary": shapes_vary(ctx),
    }
    owner = loop_owner(ctx.frameworks)
    if owner:  # the framework runs the loop: no whole-step graph
        evidence["loop_owner"] = owner
    if inside > 0 and compiled < COMPILED_SHARE:
        # what torch.compile can take: the gaps around the ops, not inside a library call
        evidence["saving_by_remedy"] = {"compile": lost - inside}
    if compiled >= COMPILED_SHARE:
        evidence["compiled"] = True
    fix = COMPILED_FIX if compiled >= COMPILED_SHARE else EAGER_FIX
    if evidence["shapes_vary"]:
        rest = SHAPES_VARY_COMPILED if compiled >= COMPILED_SHARE else SHAPES_VARY_LAUNCH
        fix = f"{SHAPES_VARY_FIX} {rest}"
    return [
        ctx.finding(
            code="launch-bound",
            title="many short kernels: the GPU idles while the host issues the next ones",
            lost_ms=lost,
            evidence=evidence,
            fix=fix,
            spans=ctx.spans(idle),
        )
    ]
