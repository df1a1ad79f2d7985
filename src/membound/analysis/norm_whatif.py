"""What membound's norm kernels would do to this loop's step, replayed with their measured cost.

membound's fused norm kernels take ~55% of ATen's GPU time per fwd+bwd but 2-3x its host time
(H200, 12288 x 768 under bf16 autocast: 86 against 156 us of GPU time, 411 against 154 us of
host time on one host, 543 against 251 on another; benchmarks/results/
probe_norm_host_2026-12-02b.jsonl). Whether that saves step time depends on how far ahead of
its GPU the loop's host runs: on eager GPT-2, FusedAddLayerNorm saved 2.36 ms/step on the
first host and cost 19.93 on the second. A rule on the profiler's overhead
(`fixes.host_limited`) cannot tell how much slack the host has; the loop's replay
(`analysis.replay`) can. `whatif` replays the recorded step, calibrated on the unprofiled one,
with ATen's norm kernels shortened to membound's share of their GPU time and membound's extra
host time added to each norm launch (benchmarks/probe_replay_norm_host.py: with 100 us per
launch it gave +3.08 and -16.22 ms/step on those two loops).

- **Norm kernels** are recognised by name (`NORM_KERNEL`: ATen's LayerNorm kernels, the same
  templates with the RMS flag for `_fused_rms_norm`, their GammaBeta backward; other
  libraries' `*LayerNorm*`/`*RMSNorm*` kernels). A **norm launch** is the launch of the first
  kernel of a run of consecutive norm kernels on one stream: one forward, one backward
  (input-grad then gamma/beta) per norm, which are the two calls membound's host cost is
  spread over.
- **swap_norms**: norm kernels x `membound.gpu_us / aten.gpu_us`; each norm launch gets
  `(membound.host_us - aten.host_us) / 2` more host work.
- **fused_add_norm**: the residual add kernel right before each forward run and the gradient
  add right after each backward run (`ADD_KERNEL`) fold into the norm: those and the norm
  kernels x `membound_add.gpu_us / aten_add.gpu_us`, with `(membound_add.host_us -
  aten_add.host_us) / 2` per norm launch (the add's own launch call is in `aten_add`'s host
  time, and stays in the replay: the difference accounts for it).

None where the replay cannot be trusted: no unprofiled timing, a replay that does not give
the recorded step, no calibration, or no norm kernel in the trace. Unlike `host-sync`'s
replay (`rules.host_sync.GPU_BOUND_SHARE`) it also runs where the host sets the pace: there
the extra host work of each norm launch is the step's, and the replay puts it at the launches
(it need not find slack). On timm's ViT-B/16 (GPU busy 65%, 2026-12-04, `vit_timm_oos1`)
it predicted swap_norms at -7.13 ms/step where it measured -16.43: the sign that keeps the
fix from being offered, half the loss. No other recorded fixture's prediction moved.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from membound.analysis.replay import Replay

#: ATen's LayerNorm/RMSNorm kernels (vectorized_layer_norm_kernel, layer_norm_grad_input_kernel,
#: GammaBetaBackwardCUDAKernel, RowwiseMomentsCUDAKernel + LayerNormForwardCUDAKernel; the RMS
#: variants are the same templates), and other libraries' (cuApplyLayerNorm, *rms_norm*)
NORM_KERNEL = re.compile(
    r"layer_?norm|rms_?norm|GammaBeta|RowwiseMoments|ComputeInternalGradients", re.I
)
#: a norm kernel of the backward pass
BACKWARD_KERNEL = re.compile(r"grad|backward|GammaBeta|ComputeInternalGradients", re.I)
#: ATen's elementwise add kernels (CUDAFunctor_add, CUDAFunctorOnSelf_add, ...)
ADD_KERNEL = re.compile(r"_add<|add_kernel", re.I)
#: host launches a norm's fwd+bwd host cost is spread over (its forward run, its backward run)
LAUNCHES = 2
#: variants of `nn.host_cost.measure`'s result this reads
VARIANTS = ("aten", "aten_add", "membound", "membound_add")


def measured(cost: Any) -> dict[str, dict[str, float]] | None:
    """The host and GPU µs per fwd+bwd of each variant of a `nn.host_cost` result, or None
    where one is missing or not a positive number (a failed probe keeps {"error": ...})."""
    if not isinstance(cost, dict) or "error" in cost:
        return None
    out = {}
    for v in VARIANTS:
        d = cost.get(v)
        if not isinstance(d, dict):
            return None
        try:
            host, gpu = float(d["host_us"]), float(d["gpu_us"])
        except (KeyError, TypeError, ValueError):
            return None
        if not (host > 0 and gpu > 0):
            return None
        out[v] = {"host_us": host, "gpu_us": gpu}
    return out


def whatif(ctx, cost: Any) -> dict[str, Any] | None:
    """The predicted saving (ms/step, negative: the step gets slower) of swap_norms and of
    fused_add_norm, replayed with `cost` (`nn.host_cost.measure`'s result), with the figures
    it used; None where the replay cannot be trusted (see the module doc)."""
    m = measured(cost)
    timing = ctx.timing
    if m is None or timing is None or not timing.unprofiled_median_ms or not ctx.steps:
        return None
    r = Replay.from_trace(ctx.trace, ctx.steps)
    if r is None or not len(r.act_dur):
        return None
    marks = _marks(ctx.trace, r)
    if marks is None:
        return None
    norm, launch, adds = marks
    if not r.faithful() or not r.calibrate(timing.unprofiled_median_ms):
        return None
    base = r.step_ms()
    call_of = np.repeat(np.arange(len(r.gap)), np.diff(r.act_start))
    launch_calls = call_of[launch]

    def play(ratio: float, extra_us: float, scaled: np.ndarray) -> float:
        dur, gap = r.act_dur, r.gap
        try:
            r.act_dur = np.where(scaled, dur * ratio, dur)
            r.gap = gap.copy()
            np.add.at(r.gap, launch_calls, extra_us)
            return r.step_ms()
        finally:
            r.act_dur, r.gap = dur, gap

    a, a_add, ours, ours_add = (m[v] for v in VARIANTS)
    swap_ratio = ours["gpu_us"] / a["gpu_us"]
    swap_extra = (ours["host_us"] - a["host_us"]) / LAUNCHES
    add_ratio = ours_add["gpu_us"] / a_add["gpu_us"]
    add_extra = (ours_add["host_us"] - a_add["host_us"]) / LAUNCHES
    swap = base - play(swap_ratio, swap_extra, norm)
    fused = base - play(add_ratio, add_extra, norm | adds)
    return {
        "swap_norms_ms_per_step": round(swap, 4),
        "fused_add_norm_ms_per_step": round(fused, 4),
        "step_ms": round(base, 4),
        "extra_host_us_per_call": round(swap_extra, 2),
        "extra_host_us_per_call_add": round(add_extra, 2),
        "gpu_ratio": round(swap_ratio, 4),
        "gpu_ratio_add": round(add_ratio, 4),
        "measured": m,
        "shape": cost.get("shape"),
        "norm_launches_per_step": round(int(launch.sum()) / r.steps, 1),
        "residual_adds_per_step": round(int(adds.sum()) / r.steps, 1),
        "profiler_cost_per_call_us": round(r.cost_per_call, 3),
        "steps_replayed": r.steps,
    }


def of(ctx) -> dict[str, Any] | None:
    """`whatif(ctx, ctx.norm_host_cost)`, replayed once per analysis and kept on it (the
    memory rules and the report's note read it); None without a measurement."""
    cost = getattr(ctx, "norm_host_cost", None)
    if cost is None:
        return None
    if not hasattr(ctx, "_norm_whatif"):
        ctx._norm_whatif = whatif(ctx, cost)
    return ctx._norm_whatif


def note(w: dict[str, Any]) -> str:
    """The report's line on what was measured and what the replay made of it."""
    return (
        f"membound's norms: {w['extra_host_us_per_call']:+.0f} us of host per call here, "
        f"{w['gpu_ratio']:.0%} of ATen's GPU time (measured after the script); replayed: "
        f"swap_norms {w['swap_norms_ms_per_step']:+.2f} ms/step, fused_add_norm "
        f"{w['fused_add_norm_ms_per_step']:+.2f}"
    )


def _marks(trace, r: Replay) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Over the replay's activities: the norm kernels, the first kernel of each run of them
    on a stream (its launch is a norm launch), and the residual/gradient adds next to the
    runs; None without a norm kernel."""
    codes = trace.gpu.name[r.act_row]
    uniq, inv = np.unique(codes, return_inverse=True)
    labels = [trace.names[int(c)] for c in uniq.tolist()]
    is_norm = np.array([bool(NORM_KERNEL.search(n)) for n in labels], dtype=bool)[inv]
    if not is_norm.any():
        return None
    is_bwd = np.array([bool(BACKWARD_KERNEL.search(n)) for n in labels], dtype=bool)[inv]
    is_add = np.array([bool(ADD_KERNEL.search(n)) for n in labels], dtype=bool)[inv]
    n = len(codes)
    prev, nxt = np.full(n, -1), np.full(n, -1)
    for k in np.unique(r.act_stream).tolist():
        idx = np.flatnonzero(r.act_stream == k)  # launch order on that stream
        prev[idx[1:]], nxt[idx[:-1]] = idx[:-1], idx[1:]
    first = is_norm & ~((prev >= 0) & is_norm[np.maximum(prev, 0)])
    last = is_norm & ~((nxt >= 0) & is_norm[np.maximum(nxt, 0)])
    adds = np.zeros(n, dtype=bool)
    # a forward run (no backward kernel) has its residual add before it; a backward run
    # its gradient add (the residual stream's two gradients summed) after it
    for s in np.flatnonzero(first).tolist():
        e = s
        backward = bool(is_bwd[s])
        while not last[e]:
            e = int(nxt[e])
            backward = backward or bool(is_bwd[e])
        j = int(nxt[e]) if backward else int(prev[s])
        if j >= 0 and is_add[j]:
            adds[j] = True
    return is_norm, first, adds
