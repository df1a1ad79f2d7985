"""What bf16 changes of an fp16-autocast loop's convolutions, matmuls and norms: the loop's
timeline replayed with each call's kernels at the speed `trace.dtype_probe` measured for its
shape in bf16, here, after the script (and likewise channels_last, `WHAT_IFS`).

bf16 in place of fp16 autocast was predicted from what it removes (the GradScaler's sync,
`host-sync`): the same kernels at the same speed otherwise. Convolutions break that. PyTorch
sends an NCHW depthwise convolution to cuDNN only in fp16 (`analysis.depthwise`), so in bf16
it runs on PyTorch's own kernels: timm's EfficientNet-B0 recipe on an H100 (2026-12-06, 16
depthwise convolutions a step) lost 33.06 ms of a 149 ms step with bf16 where 3.88 was
predicted, and a ConvNeXt-T recipe (7 x 7 depthwise convolutions, channels_last inside its
blocks' cuDNN calls) saved 12.87 and 14.63 where 9.20 and 10.49 were predicted. How fast each
shape runs in bf16 against fp16 on this GPU is what the probe measures.

`of(ctx)` maps each kernel of the timeline pass to the op call that launched it
(`analysis.kernel_map`), scales the kernels of the fp16 convolution and matmul calls by their
shape's measured bf16/fp16 time (a call whose shape was not timed takes the time-weighted
ratio of the timed calls of its kind: depthwise or not, forward or backward, matmul), and
replays the step (`analysis.replay`, calibrated as the GPU what-if's). The saving is signed:
kernels that get slower lengthen the replayed step, by as much as the GPU paces it. It is
kept in the GPU what-if under "bf16_kernels" and added to the `bf16` remedy's saving
(`analysis.remedies`). No probe, no mapped kernels, or no trusted replay: None, and the
depthwise note says what is not known (`analysis.depthwise.bf16_note`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from membound.analysis import gpu_whatif, kernel_map

#: the dtype whose calls the bf16 what-if moves (fp32's are `tf32-matmul`'s)
FROM = "float16"


def kind_of(key: dict[str, Any]) -> str:
    """The class a call without a timed shape borrows its ratio from: the op, and for a
    convolution whether it is depthwise (one input channel a group, more than one group)."""
    op = key["op"]
    if op.startswith("conv"):
        w = key.get("weight") or []
        depthwise = len(w) == 4 and w[1] == 1 and key.get("groups", 1) > 1
        return f"{op}:{'depthwise' if depthwise else 'dense'}"
    return op


def call_key(trace, call) -> dict[str, Any] | None:
    """The probe's key (`trace.dtype_probe.key_of`) of op call `call` from its recorded
    shapes in `trace` (the trace its calls came from), or None."""
    from membound.trace.dtype_probe import key_of

    i = call.cpu_index
    s = int(trace.cpu.shape[i]) if 0 <= i < len(trace.cpu) else -1
    if s < 0:
        return None
    dims, types, concrete = trace.shapes[s]
    st = int(trace.cpu.strides[i])
    return key_of(call.name, dims, types, concrete, trace.strides[st] if st >= 0 else None)


def lookup(measured: dict[str, float], key: dict[str, Any]) -> float | None:
    """The measured ratio of `key` (`trace.dtype_probe.ratios_of`), or None: a key whose call
    records no cuDNN search flag (`"benchmark": None`: the backward, PyTorch's depthwise
    kernel) is stored with the cuDNN forwards' flag."""
    from membound.trace.dtype_probe import tag

    if key.get("benchmark", False) is not None:
        return measured.get(tag(key))
    for bench in (False, True):
        found = measured.get(tag({**key, "benchmark": bench}))
        if found is not None:
            return found
    return None


def call_ratios(
    ctx, variant: str = "bf16_ms", dtype: str | None = FROM, ops=None, split: bool = False
) -> tuple[dict[int, float], Any] | None:
    """({index into ctx.calls: the variant's time over the recorded one}, the share of
    their kernel time whose own shape was timed) for the calls recorded in `dtype` (None:
    any) whose op the probe takes (`ops`: of those, the op names given), or None where the
    probe timed none of them. Keys the probe timed give their own ratio; the rest the
    time-weighted ratio of their kind's timed calls (`kind_of`); a kind with none timed is
    left out (kept as it ran). `split`: ({timed calls' own ratios}, {the others' borrowed
    ones}) instead."""
    from membound.analysis.op_calls import call_column, value_codes
    from membound.trace.dtype_probe import OPS, ratios_of, variants

    measured = ratios_of(getattr(ctx, "dtype_cost", None), variant, dtype)
    trace = getattr(ctx, "op_trace", None) or getattr(ctx, "trace", None)
    if not measured or trace is None or not len(ctx.calls):
        return None
    codes, names = value_codes(call_column(ctx.calls, "name"))
    probed = np.array([n in OPS and (ops is None or n in ops) for n in names], dtype=bool)
    own: dict[int, float] = {}
    untimed: dict[int, str] = {}
    by_kind: dict[str, list[float]] = {}
    for i in np.flatnonzero(probed[codes]).tolist():
        call = ctx.calls[i]
        if call.device_us <= 0:
            continue
        key = call_key(trace, call)
        if key is None or (dtype is not None and key["dtype"] != dtype):
            continue
        if variant not in {v[0] for v in variants(key)}:
            continue  # the fix leaves it as it is (channels_last already, bf16 already)
        found = lookup(measured, key)
        if found is None:
            untimed[i] = kind_of(key)
            continue
        own[i] = found
        weights = by_kind.setdefault(kind_of(key), [0.0, 0.0])
        weights[0] += call.device_us
        weights[1] += call.device_us * found
    if not own:
        return None
    timed_us = sum(w[0] for w in by_kind.values())
    mean = {k: w[1] / w[0] for k, w in by_kind.items() if w[0] > 0}
    borrowed = {i: mean[k] for i, k in untimed.items() if k in mean}
    if split:
        return own, borrowed
    own.update(borrowed)
    total_us = sum(ctx.calls[i].device_us for i in own)
    return own, timed_us / total_us if total_us > 0 else 0.0


#: what-if name -> (the probe's variant, the recorded dtype it moves, what the note calls it)
WHAT_IFS = {
    "bf16_kernels": ("bf16_ms", FROM, "bf16 in place of fp16"),
    "channels_last_kernels": ("channels_last_ms", None, "channels_last"),
    # read only where both are applied (`remedies.combined`): fp32 and fp16 NCHW calls
    "bf16_channels_last_kernels": ("channels_last_bf16_ms", None, "bf16 with channels_last"),
}


def of(ctx, name: str = "bf16_kernels") -> dict[str, Any] | None:
    """{"saving_ms", "kernel_ms_before", "kernel_ms_after", "calls_per_step",
    "timed_share", "replayed", "what"} of what-if `name` (`WHAT_IFS`: fp16's calls in bf16,
    or NCHW convolutions in channels_last; module docstring); None where there is nothing
    measured to move. Kept on `ctx`."""
    cache = ctx.__dict__.setdefault("_dtype_whatifs", {})
    if name in cache:
        return cache[name]
    cache[name] = None
    variant, dtype, what = WHAT_IFS[name]
    found = call_ratios(ctx, variant, dtype)
    if not found:
        return None
    ratio, timed = found
    result: dict[str, Any] = {"what": what, **_moved(ctx, ratio), "timed_share": round(timed, 4)}
    result["ops"] = sorted({ctx.calls[i].name for i in ratio})
    if name == "channels_last_kernels":
        # torch.compile makes the same change where inductor picks channels_last: of its
        # convolutions (inductor writes the norms' kernels itself, in the layout it picked)
        result["inductor_picks_it"] = inductor_picks_channels_last(ctx)
        from membound.trace.dtype_probe import MATMULS

        convs = {i: v for i, v in ratio.items() if ctx.calls[i].name in MATMULS}
        if convs and len(convs) < len(ratio):
            result["convolutions_saving_ms"] = _moved(ctx, convs)["saving_ms"]
    cache[name] = result
    return result


def _moved(ctx, ratio: dict[int, float]) -> dict[str, Any]:
    """{"kernel_ms_before", "kernel_ms_after", "calls_per_step", "replayed", "saving_ms"}
    of the calls `ratio` names (index into ctx.calls: their kernels' time scale), the step
    replayed with their kernels so scaled where the replay is trusted, else the kernel
    time's change itself (the step paced by the GPU). Signed."""
    idx = np.fromiter(ratio, dtype=np.int64)
    scale = np.fromiter(ratio.values(), dtype=np.float64)
    device = np.array([ctx.calls[int(i)].device_us for i in idx.tolist()])
    before = ctx.per_op_step(float(device.sum()) / 1e3)
    after = ctx.per_op_step(float((device * scale).sum()) / 1e3)
    result: dict[str, Any] = {
        "kernel_ms_before": round(before, 4),
        "kernel_ms_after": round(after, 4),
        "calls_per_step": round(ctx.per_op_step(len(idx)), 1),
        "replayed": False,
        "saving_ms": round(before - after, 4),
    }
    r = gpu_whatif.calibrated_replay(ctx)
    mapped = kernel_map.timeline_calls(ctx) if r is not None else None
    if r is not None and mapped is not None:
        per_call = np.ones(len(ctx.calls) + 1)
        per_call[idx] = scale
        call_of = mapped[r.act_row]  # -1: unmapped, which keeps its time (per_call[-1] = 1)
        act_scale = np.where(r.act_kernel, per_call[call_of], 1.0)
        base = r.step_ms()
        floor = gpu_whatif.host_floor(getattr(ctx, "timing", None), r.waited_ms, base)
        replayed = r.step_ms(act_scale=act_scale)
        if floor is not None and replayed < base:
            replayed = max(replayed, floor)
        result.update(saving_ms=round(base - replayed, 4), replayed=True)
    return result


def inductor_picks_channels_last(ctx) -> bool | None:
    """Whether torch.compile's inductor would lay this model's convolutions out channels_last
    when training (`GraphLowering.decide_layout_opt` with `layout_optimization` on, its
    default): there are NCHW convolutions, none grouped with more than one input channel a
    group, none narrowing the channels with a kernel wider than 1 (out x 2 <= in: a U-Net's
    decoder), and not all of them 64 channels or fewer. Its other conditions (a graph of at
    least 300 nodes a convolution, dynamic shapes) are not seen here. None where the trace
    has no forward convolution with its shapes."""
    from membound.analysis.op_calls import call_column, value_codes
    from membound.trace.dtype_probe import CONV_FWD, DEPTHWISE_FWD

    trace = getattr(ctx, "op_trace", None) or getattr(ctx, "trace", None)
    if trace is None or not len(ctx.calls):
        return None
    codes, names = value_codes(call_column(ctx.calls, "name"))
    fwd = np.array([n in (CONV_FWD, DEPTHWISE_FWD) for n in names], dtype=bool)
    weights, nchw = set(), False
    for i in np.flatnonzero(fwd[codes]).tolist():
        key = call_key(trace, ctx.calls[i])
        if key is None:
            continue
        weights.add((tuple(key["weight"]), key["groups"]))
        nchw = nchw or not key["channels_last"]
    if not weights:
        return None
    if not nchw:
        return False  # channels_last already: nothing for it to change
    grouped = any(g > 1 and w[1] > 1 for w, g in weights)
    narrowing = any(w[0] * 2 <= w[1] and w[2] > 1 for w, _ in weights)
    small = all(w[0] <= 64 and w[1] <= 64 for w, _ in weights)
    return not (grouped or narrowing or small)


def _said(ms: float, plural: bool = False) -> str:
    verb = ("save", "cost") if plural else ("saves", "costs")
    return f"{verb[0]} {ms:.2f}" if ms >= 0 else f"{verb[1]} {-ms:.2f}"


def note(w: dict[str, Any]) -> str:
    """The report's line on a what-if; where the norms' part differs in sign from the
    convolutions' (`convolutions_saving_ms`), each part, and why a GroupNorm loses in
    channels_last."""
    how = "the step replayed" if w.get("replayed") else "kernel time alone (no trusted replay)"
    change = w["saving_ms"]
    line = (
        f"{w['what']}, timed here after the script: the convolutions, matmuls and norms it "
        f"changes ({w['calls_per_step']:.0f} calls a step, {w['timed_share']:.0%} of their "
        f"time timed at their own shapes) took {w['kernel_ms_before']:.2f} ms/step of kernels "
        f"and would take {w['kernel_ms_after']:.2f}; with {how}, that {_said(change)} ms/step "
        "(in the remedy's figure)"
    )
    convs = w.get("convolutions_saving_ms")
    if convs is None or (convs >= 0) == (change - convs >= 0):
        return line
    line += f": the convolutions {_said(convs, True)}, the norms {_said(change - convs, True)}"
    if change - convs < 0 and any("group_norm" in op for op in w.get("ops") or ()):
        line += (
            " (CUDA's GroupNorm has no channels_last kernel: its input is copied to NCHW, "
            "and its output and gradient back to channels_last by the convolutions after it)"
        )
    return line
