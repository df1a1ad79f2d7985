"""What the step saves when the GPU's work gets shorter: the loop's own timeline, replayed.

The GPU-work findings (`memory-bound-op`, `unfused-chain`, `fp32-storage`, `fp32-matmul`)
say how much kernel time their fix removes. That is the step's saving only where the GPU
sets the pace. Where the host launches the work no faster than the GPU runs it, the step
falls only to the host's own time; where the host waits in a sync, the kernels before the
sync shorten the wait. Out of sample on the H200 (2026-12-04, `examples/real/bert_finetune.py`,
BERT-base fp32, GPU busy 94% of 61.2 ms): `fp32-matmul` summed 45.7 ms/step of matmul time
above the TF32 roof, while TF32 saved 29.4 and bf16 27.8: once the matmuls ran fast the step
settled near the ~30 ms the host needs to launch it.

`curve(ctx)` replays the timeline pass (`analysis.replay`, calibrated to the unprofiled
step, as the host-sync rule does; where the GPU set the pace and hid the profiler's host
cost, the cost `membound diagnose` measured after the script is taken off instead,
`trace.profiler_cost`) with every kernel's duration scaled by 1 - f, for a few
f, and records the step saving against the kernel time removed. `saving(curve, removed_ms)`
interpolates it: a remedy's GPU-work saving is read through it (`analysis.remedies`).

The curve is for fixes that change how fast the kernels run and not what the host does: TF32
and bf16 autocast (`analysis.remedies.CURVE_REMEDIES`). bf16 autocast does add host work:
every op passes its dispatch, and matmul inputs and their gradients are cast by kernels of
their own. In a loop the host paces, that work comes back on the step: the T5's bf16 saved
0.7-7.5 ms/step where TF32 saved 14-20 (2026-12-05). Its saving is therefore read through the
curve and capped at the curve's end less that host work (`autocast_cap`,
`AUTOCAST_LAUNCHES_PER_KERNEL`), where the machine's launch cost was measured. Fixes that
remove kernels (torch.compile, fused norms, 16-bit storage that drops autocast's casts, CUDA
graphs) also remove the host's work of launching them, which a replay of shorter kernels
cannot see: read through the curve, the recorded GPT-2 and Llama loops (their host only just
ahead of the GPU) predicted 1-18 ms/step for compile where it measured 17-30.

Every kernel is scaled alike: the replay does not know which kernels a fix shortens. In a loop
the GPU paces, any choice gives the removed time back; where the host paces, little of it;
between the two the placement matters and the curve is an estimate. Its floor, the host's time
in the profiled timeline, is the weak part: on three H200 runs of the BERT loop TF32 measured
29.4 and 35.8 ms/step against 29.6 and 28.0 predicted, bf16 27.8, 13.5 and 21.2 against 29.6,
9.3 and 28.0 (`tests/analysis/test_truth_2026_12_04.py`). The T5 loop (2026-12-05) shows it:
the calibration took 7.71 µs off each call (the probe measured 4.28), so its floor was 53 ms
where TF32 measured 62.6; with the measured cost the floor is 59.8 and TF32's prediction 13.2
instead of 15.9 (measured 4.55), and matching the unprofiled step then needs 7.75 µs off every
kernel's GPU time, more than CUPTI costs a kernel. What is left may be host time the
TF32/autocast path adds per matmul (`benchmarks/probe_matmul_host.py`). A second floor comes
from the host's CPU time, measured without the profiler: the training thread's with the
autograd threads' (backward runs there on CUDA while the training thread waits), per median
step (`trace.step_clock`), less the replay's time waiting in syncs (a CUDA sync spins, so that
waiting counts as CPU time). The replay's floor is its recorded host gaps after calibration;
where the profiler's cost was taken off too generously, or host work hides behind the GPU
(another thread's, waiting on the GIL), the CPU time says so, and the larger floor is kept
(`host_floor`). Where the GPU paces the step, the calibration cannot see the profiler's cost
(any cost from the least that fits gives the step) and keeps the least: on an H100 BERT in
fp32 (2026-12-07) the trace replayed to 56 ms/step of host work where the loop as run had 32,
and TF32 was predicted 8.80 where it saved 27.83. With `membound diagnose --sleeping-syncs`
(`trace.sync_mode`) the threads' CPU is host work, their growth under the profiler is its
cost (`StepTiming.profiler_host_ms`: 17.45 ms/step there), and the replay takes that off
(`Replay.raise_cost`), as far as it still gives the unprofiled step. The curve is not made
where the replay cannot be trusted: no unprofiled step, work on more than one stream (events
order them, which the replay does not model), a replay that does not give the recorded step,
or one that cannot be calibrated.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from membound.analysis.replay import Replay

#: findings whose saving is kernel time (read through the curve)
GPU_WORK = frozenset(
    {"memory-bound-op", "unfused-chain", "fp32-storage", "fp32-matmul", "tf32-matmul"}
)

#: bf16 autocast's added host work, in plain launches' host time (`trace.profiler_cost`'s
#: `plain_us`, measured on the machine) per kernel the step launches: autocast wraps every op (a
#: dispatch of its own) and casts matmul inputs and, in backward, their gradients (kernels of
#: their own). Paired runs with TF32 and bf16 in one call, read as if the host paced both, give
#: (TF32's saving - bf16's) / (kernels a step x plain_us): the HF T5 0.10 and 0.39 on the H200,
#: 0.89 and 1.14 on H100s; the HF BERT 0.92 and 2.4 on the H200 (2026-12-04/05,
#: benchmarks/results/truth.csv). The value is near the low end, so that on
#: none of them is bf16's saving predicted below what it measured by more than the truth bench's
#: tolerance; where the host pace differed 3x between machines, no one value fits. Where
#: `membound diagnose` measured it on the machine after the script (a small block's step with
#: and without autocast, `trace.profiler_cost.autocast_cost`), that figure is used instead;
#: this one serves traces without it.
AUTOCAST_LAUNCHES_PER_KERNEL = 0.4

#: shares of the kernel time removed at which the step is replayed
FRACTIONS = (0.0, 0.1, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9, 1.0)

#: a replay whose profiled step is at most this much above the unprofiled one had the GPU
#: set the pace, and a curve that saves less than `HIDDEN_SHARE` of the kernel time with every
#: kernel gone is stopped by the host's floor: together, the profiler's host cost may be in
#: that floor unseen, and the note points at `--syncs sleep-profiled` (on the
#: H100 BERT fine-tune, 2026-12-07: 8.80 of 59.15 ms/step with spinning syncs, TF32 saved
#: 27.83; with sleeping ones TF32 was predicted 29.42 where it saved 33.88)
HIDDEN_GROWTH, HIDDEN_SHARE = 0.05, 0.5


def curve(ctx) -> dict[str, Any] | None:
    """{"kernel_ms_per_step", "removed_ms": [...], "saving_ms": [...]} for `ctx`'s timeline
    steps, or None where the replay is not trusted (module docstring). Kept on `ctx`."""
    if hasattr(ctx, "_gpu_whatif"):
        return ctx._gpu_whatif
    ctx._gpu_whatif = None
    timing = getattr(ctx, "timing", None)
    r = calibrated_replay(ctx)
    if r is None:
        return None
    kernel_ms = float(r.act_dur[r.act_kernel].sum()) / r.steps / 1e3
    if kernel_ms <= 0:
        return None
    kernels = float(r.act_kernel.sum()) / r.steps
    base = r.step_ms()
    floor = host_floor(timing, r.waited_ms, base)
    factor = getattr(ctx, "autocast_factor", None)  # measured on the machine, or None
    removed, saved = [], []
    for f in FRACTIONS:
        removed.append(round(f * kernel_ms, 4))
        # nothing removed is the base step itself, already played
        after = base if f == 0.0 else r.step_ms(kernel_scale=1.0 - f)
        if floor is not None:
            after = max(after, floor)
        saved.append(round(max(base - after, 0.0), 4))
    # a replay of shorter kernels never takes longer; keep the curve monotonic
    saved = np.maximum.accumulate(np.array(saved)).tolist()
    ctx._gpu_whatif = {
        "kernel_ms_per_step": round(kernel_ms, 4),
        "step_ms": round(base, 4),
        "removed_ms": removed,
        "saving_ms": saved,
        "profiler_cost_per_call_us": round(r.cost_per_call, 3),
        "host_cpu_floor_ms": None if floor is None else round(floor, 4),
        "kernels_per_step": round(kernels, 1),
        "autocast_host_ms": autocast_host_ms(kernels, getattr(ctx, "launch_host_us", None), factor),
    }
    if factor is not None:
        ctx._gpu_whatif["autocast_launches_per_kernel_measured"] = factor
    if (
        not getattr(timing, "syncs_slept", False)
        and r.as_profiled_ms <= (1 + HIDDEN_GROWTH) * timing.unprofiled_median_ms
        and saved[-1] < HIDDEN_SHARE * kernel_ms
    ):
        # the GPU paced the profiled step: the profiler's host cost hid behind it, and the
        # floor that stops this curve may hold it (`trace.sync_mode`)
        ctx._gpu_whatif["profiler_cost_hidden"] = True
        why = getattr(timing, "syncs_not_slept", None)
        if why:
            ctx._gpu_whatif["syncs_not_slept"] = why
    return ctx._gpu_whatif


def calibrated_replay(ctx) -> Replay | None:
    """`ctx`'s timeline steps as a `Replay` calibrated to the unprofiled step (kept on `ctx`,
    shared by the what-ifs), or None where it is not trusted: no unprofiled step, work on more
    than one stream, no kernel, a replay that does not give the recorded step, or one that
    cannot be calibrated."""
    if hasattr(ctx, "_replay"):
        return ctx._replay
    ctx._replay = None
    timing = getattr(ctx, "timing", None)
    if timing is None or not timing.unprofiled_median_ms or not ctx.steps:
        return None
    r = Replay.from_trace(ctx.trace, ctx.steps)
    if r is None or r.streams_busy() > 1 or not r.act_kernel.any():
        return None
    hidden = getattr(ctx, "profiler_cost_us", None) or 0.0
    if not r.faithful() or not r.calibrate(timing.unprofiled_median_ms, hidden):
        return None
    added = getattr(timing, "profiler_host_ms", None)  # measured where the syncs slept
    if added and len(r.own):
        r.raise_cost(added * 1e3 * r.steps / len(r.own), timing.unprofiled_median_ms)
    ctx._replay = r
    return r


def autocast_host_ms(
    kernels_per_step: float, launch_us: float | None, factor: float | None = None
) -> float | None:
    """The host work bf16 autocast adds a step (ms): `factor` plain launches' host time
    (`launch_us`, measured on the machine) per kernel the step launches, `factor` as measured
    on the machine with it (`trace.profiler_cost.autocast_cost`), else
    `AUTOCAST_LAUNCHES_PER_KERNEL`; None where the launch was not measured."""
    if not launch_us or kernels_per_step <= 0:
        return None
    per_kernel = AUTOCAST_LAUNCHES_PER_KERNEL if factor is None else factor
    return round(per_kernel * kernels_per_step * launch_us / 1e3, 4)


def autocast_cap(c: dict[str, Any] | None) -> float | None:
    """The most bf16 autocast can save of the GPU work (ms/step): the curve's saving with every
    kernel gone (where the host's own time is the floor) less the host work autocast adds
    (`autocast_host_ms`), not below 0; None where either is unknown."""
    if not c or c.get("autocast_host_ms") is None or not c.get("saving_ms"):
        return None
    return max(float(c["saving_ms"][-1]) - float(c["autocast_host_ms"]), 0.0)


def host_floor(timing, waited_ms: float, step_ms: float) -> float | None:
    """The step below which no faster GPU work takes it (ms), from the host's own CPU time:
    the training thread's with the autograd threads' (`StepTiming.launchers_cpu`, measured
    unprofiled) less the time the replay has the host waiting in syncs and blocking copies
    (`waited_ms`: a CUDA sync spins, and the spinning counts as CPU time); where the syncs
    slept (`--sleeping-syncs`) the CPU time is host work as it is. None where the capture did
    not read it, or where it is not below the step (then it is no floor)."""
    cpu = getattr(timing, "launchers_cpu", None)
    if cpu is None:
        return None
    # a sleeping sync's waiting is no CPU time (`trace.sync_mode`): nothing to take off
    floor = cpu if getattr(timing, "syncs_slept", False) else cpu - max(waited_ms, 0.0)
    return floor if 0.0 < floor < step_ms else None


def saving(c: dict[str, Any] | None, removed_ms: float) -> float:
    """The step's saving when `removed_ms` of kernel time per step goes (curve `c`, linear
    between its points); `removed_ms` itself where there is no curve."""
    if not c or removed_ms <= 0:
        return max(removed_ms, 0.0)
    xs, ys = c.get("removed_ms") or [], c.get("saving_ms") or []
    if len(xs) < 2 or len(xs) != len(ys):
        return removed_ms
    return float(np.interp(min(removed_ms, xs[-1]), xs, ys))


def note(c: dict[str, Any]) -> str:
    """The report's line on the curve."""
    half = saving(c, 0.5 * c["kernel_ms_per_step"])
    floor = c.get("host_cpu_floor_ms")
    measured = f"; the host's CPU time puts it at {floor:.2f} ms/step at least" if floor else ""
    autocast = c.get("autocast_host_ms")
    factor = c.get("autocast_launches_per_kernel_measured")
    how = (
        f", {factor:.2f} launches' host time a kernel as measured here"
        if factor is not None
        else ""
    )
    priced = (
        f"; bf16 autocast adds about {autocast:.2f} ms/step of host work (its casts and "
        f"dispatch{how}), which its saving pays"
        if autocast
        else ""
    )
    why = c.get("syncs_not_slept")
    hidden = (
        "; the GPU paced the profiled step, so the profiler's host cost may hide in that "
        "floor: a capture whose syncs sleep while profiled measures it (`membound "
        "diagnose --syncs sleep-profiled`, the default on CUDA 12.1 on; this one's spun"
        + (f": {why}" if why else "")
        + ")"
        if c.get("profiler_cost_hidden")
        else ""
    )
    return (
        f"GPU what-if (the timeline replayed with shorter kernels): {c['kernel_ms_per_step']:.2f} "
        f"ms/step of kernels; half of it gone would save {half:.2f} ms/step, all of it "
        f"{c['saving_ms'][-1]:.2f} (the host's own time is the floor{measured}){priced}{hidden}"
    )
