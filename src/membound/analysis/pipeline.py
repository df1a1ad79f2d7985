"""The analysis of loaded traces: timeline, op rows on the roofline, findings; one trace
(`analyze_trace`), several files (`analyze`: one by one, steps pooled by `merge`)."""

from __future__ import annotations

import dataclasses
import gc
import os
from collections.abc import Sequence
from pathlib import Path

from membound.analysis import (
    compile_whatif,
    depthwise,
    dtype_whatif,
    gpu_whatif,
    loader_cpu,
    norm_whatif,
    optimizer_whatif,
    pacing,
    recompute,
    remedies,
)
from membound.analysis import rules as _builtin_rules  # noqa: F401  (registers them)
from membound.analysis.clean import clean_trace
from membound.analysis.context import AnalysedTrace
from membound.analysis.findings import Finding, capped, ranked, run_rules
from membound.analysis.op_rows import above_roof_note, op_rows
from membound.analysis.ops import device_time_us, graph_replay_time_us, join_calls
from membound.analysis.result import IDLE_CAUSES, Analysis, OpRow
from membound.analysis.rules import host_sync
from membound.analysis.step_timing import PROFILER, StepTiming, remove_profiler_idle, warmup_note
from membound.analysis.timeline import Timeline, step_windows
from membound.device.lookup import ceilings_beside, ceilings_for_name
from membound.errors import BadInput
from membound.trace import dtype_probe, graph_ops, layout_probe, loader_probe, profiler_cost
from membound.trace.capture_meta import notes_from_meta, read_meta
from membound.trace.load import load_trace
from membound.trace.model import CPU_OP


def analyze(
    paths: str | os.PathLike | Sequence[str | os.PathLike], ceilings=None, progress=None
) -> Analysis:
    """Analyze kineto trace file(s). Several files are analysed one by one and their steps
    pooled (see `merge`); `ceilings=None` looks them up by the trace's device name.
    `progress(done, total)` reports the bytes read of each file (see `load_trace`)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    # a big trace makes millions of small acyclic objects; the cyclic GC would rescan them
    # over and over (seconds per GB), so it is paused while loading and analysing
    enabled = gc.isenabled()
    gc.disable()
    try:
        results = [_analyze_file(p, ceilings, progress) for p in paths]
    finally:
        if enabled:
            gc.enable()
    if not results:
        raise BadInput(
            "no trace given; pass one or more kineto trace files (.json, .json.gz or .json.xz)."
        )
    return results[0] if len(results) == 1 else merge(results)


def _analyze_file(path, ceilings, progress) -> Analysis:
    """One trace file, with what membound's capture wrote beside it (meta, ops pass)."""
    meta = read_meta(path)
    ops = None
    name = meta.get("ops_trace") if isinstance(meta, dict) else None
    if isinstance(name, str) and (Path(path).parent / name).is_file():
        ops = load_trace(Path(path).parent / name)
    captures = _graph_captures(Path(path).parent, meta) if ops is not None else []
    trace = load_trace(path, progress)
    origin = "given" if ceilings is not None else None
    if ceilings is None and trace.has_gpu:  # the ceilings the capture was made with, if kept
        ceilings, beside = ceilings_beside(Path(path).parent, trace.device_name)
        origin = f"{Path(beside).name} beside the trace" if beside else None
    return analyze_trace(
        trace, ceilings, meta, ops, ceilings_origin=origin, graph_captures=captures
    )


def _graph_captures(folder: Path, meta) -> list:
    """The CUDA-graph captures the capture meta lists (`graph_captures`) and that are on
    disk beside the trace, loaded; one that cannot be read is left out."""
    listed = meta.get("graph_captures") if isinstance(meta, dict) else None
    out = []
    for entry in listed if isinstance(listed, list) else []:
        name = entry.get("trace") if isinstance(entry, dict) else None
        if isinstance(name, str) and (folder / name).is_file():
            try:
                out.append(load_trace(folder / name))
            except BadInput:
                continue
    return out


def _no_gpu_work(trace, window) -> bool:
    """No GPU activity of the main device starts inside the step window."""
    g = trace.gpu
    inside = (g.ts >= window[1]) & (g.ts < window[2]) & (g.device == trace.main_device)
    return not bool(inside.any())


def kernel_args_of(meta) -> dict[str, list[str]] | None:
    """The launch parameter names of the inductor kernels the capture compiled, by kernel
    name (the meta's "kernel_args", `trace.kernel_args`), which split their bytes into reads
    and writes; None where the meta has none. Entries that are not a name and a list of
    names are left out: a kernel with no usable names is costed from the trace alone."""
    table = meta.get("kernel_args") if isinstance(meta, dict) else None
    if not isinstance(table, dict):
        return None
    kept = {
        k: list(v)
        for k, v in table.items()
        if isinstance(k, str) and isinstance(v, list) and all(isinstance(a, str) for a in v)
    }
    return kept or None


def analyze_trace(
    trace, ceilings=None, meta: dict | None = None, ops_trace=None, ceilings_origin=None,
    graph_captures=None,
) -> Analysis:  # fmt: skip
    """Analyze an already loaded `membound.trace.model.Trace`; `meta`: the capture meta
    membound wrote beside it (`trace.capture_meta.read_meta`), with its own step timer (every
    ms/step then refers to the unprofiled step), the frameworks the script imported (fix texts) and
    the parameter names of the inductor kernels it compiled (`kernel_args_of`);
    `ops_trace`: membound's ops pass (CPU ops and shapes), which the op rows come from when
    the timeline trace recorded GPU activity alone; `ceilings_origin`: where given ceilings
    came from (said in the report); `graph_captures`: the CUDA-graph captures membound
    recorded (traces with CPU ops), whose ops are given to the ops pass's replayed kernels
    (`trace.graph_ops`)."""
    timing = StepTiming.from_meta(meta)
    frameworks = tuple(meta.get("frameworks") or ()) if isinstance(meta, dict) else ()
    # events no analysis can use (untimed, negative, absurd, ambiguous joins) are left out
    cleaned = clean_trace(trace)
    trace, notes = cleaned.trace, list(cleaned.notes)
    ops_cleaned = None
    if ops_trace is not None:
        ops_cleaned = clean_trace(ops_trace)
        ops_trace = ops_cleaned.trace
        notes += [f"ops pass: {n}" for n in ops_cleaned.notes]
        if graph_captures:
            # the replays get the captures' ops; the step windows stay those of the pass's
            # own launches (`ops_cleaned.trace`): the copied launch calls sit where the
            # capture ran them, shifted to the replay, and would move them
            captures = [clean_trace(c).trace for c in graph_captures]
            ops_trace, attached = graph_ops.attach(ops_trace, captures)
            if attached.note():
                notes.append(attached.note())
    windows, marked = step_windows(trace)
    kept = meta.get("steps_captured") if isinstance(meta, dict) else None
    recorded = meta.get("recorded_steps") if isinstance(meta, dict) else None
    if marked and isinstance(recorded, list) and not meta.get("complete"):
        # the capture names its complete recorded steps (ProfilerStep#N): only those count
        wanted = {n for n in recorded if isinstance(n, int)}
        complete = [w for w in windows if w[0] in wanted]
        if not complete:
            raise BadInput(
                f"{trace.path}: the run ended before any recorded step was complete "
                f"({meta.get('ended') or 'it stopped'}); run more steps or lower --wait/--warmup."
            )
        if len(complete) < len(windows):
            notes.append(f"{len(windows) - len(complete)} partial step(s) left out")
        windows = complete
    elif marked and isinstance(kept, int) and not meta.get("complete") and 0 < kept < len(windows):
        # the run ended inside a recorded step: a partial step never enters the figures
        notes.append(f"{len(windows) - kept} partial step(s) at the end left out")
        windows = windows[:kept]
    if marked and windows:
        windows = cleaned.windows(windows)
        timed = [w for w in windows if w[2] > w[1]]
        if len(timed) < len(windows) and timed:
            # marks out of order or of no length (corrupt times) bound no time at all
            notes.append(f"{len(windows) - len(timed)} step(s) of no duration left out")
        windows = timed
        if not windows:
            raise BadInput(
                f"{trace.path}: no step of the trace can be timed (every step mark lacks a "
                "usable ts or dur); pass a trace written by the PyTorch profiler."
            )
    if not windows:
        notes.append("the trace holds no events: nothing to analyze")
    elif not marked:
        notes.append("no step markers (ProfilerStep#N): the whole window is treated as one step")
    source, note = None, None
    if trace.has_gpu:
        if ceilings is None and trace.device_name:
            ceilings = ceilings_for_name(trace.device_name)
            if ceilings is not None:
                ceilings_origin = (
                    "the datasheet" if ceilings.source == "datasheet" else "this machine's cache"
                )
        if ceilings is not None:
            source = getattr(ceilings, "source", "measured")
            if source != "datasheet":
                when = str(getattr(ceilings, "measured_at", "") or "")[:10]
                notes.append(
                    f"ceilings measured on {ceilings.name}{' on ' + when if when else ''}, "
                    f"from {ceilings_origin or 'the caller'}"
                )
            if source == "datasheet":
                note = (
                    f"no measured ceilings for {trace.device_name}: datasheet figures used "
                    "(run `membound roofline` on that GPU for measured ones)"
                )
        else:
            note = (
                f"no ceilings for device {trace.device_name or 'unknown'}: ops are not placed on a "
                "roofline (pass --ceilings from `membound roofline --json`)"
            )
        if note:
            notes.append(note)
    else:
        notes.append(
            "CPU-only trace: no GPU activity, so GPU busy/idle, the roofline and the GPU findings "
            "do not apply; step times are reported"
        )
        ceilings = None
    if marked and trace.has_gpu and len(windows) > 1 and _no_gpu_work(trace, windows[-1]):
        if not _no_gpu_work(trace, windows[-2]):
            # its GPU work ran after the trace ended (a CUDA-graph replay launched as the
            # capture stopped, on the H200): a step of host time alone would skew every figure
            notes.append("1 step without GPU work at the end left out (the trace ended first)")
            windows = windows[:-1]
    timeline = Timeline(trace, windows)
    steps = timeline.steps
    for s in steps:
        s.idle_by_cause.setdefault(PROFILER, 0.0)
    lead = max((s.host_lead_ms for s in steps), default=0.0)
    if marked and steps and lead > 0.05 * max(s.wall_ms for s in steps):
        notes.append(
            f"the host ran up to {lead:.2f} ms ahead of the GPU: steps are placed on the GPU's "
            "clock (each starts when the GPU finishes the work launched before its host mark)"
        )
    if timing is None and (why := warmup_note(meta)):
        notes.append(why)
    if timing is not None:
        notes.append(timing.note())
        if trace.has_gpu:
            remove_profiler_idle(steps, timing.unprofiled_median_ms)
    op_steps, op_windows = len(steps), windows
    op_source = trace
    if ops_trace is not None and ops_trace.has_gpu:
        op_source = ops_trace
        op_windows, _ = step_windows(ops_cleaned.trace)
        op_windows = ops_cleaned.windows(op_windows)
        op_steps = len(op_windows)
        notes.append(
            f"ops and their costs from membound's ops pass ({op_steps} step(s) with CPU ops and "
            "shapes); the timeline and idle from the GPU-only pass"
        )
    # op time is counted inside the analysed steps, like every per-step figure (a trace
    # with one step mark has GPU work outside it), against the device time of the same span
    span = ([w[1] for w in op_windows], [w[2] for w in op_windows])
    calls = (
        join_calls(op_source, span, kernel_args_of(meta)) if trace.has_gpu and op_windows else []
    )
    device_us = device_time_us(op_source, span) if op_windows else 0.0
    rows = op_rows(calls, ceilings, device_us)
    replayed_us = graph_replay_time_us(op_source, span) if op_windows else 0.0
    if device_us > 0 and replayed_us >= 0.01 * device_us:
        notes.append(
            f"{replayed_us / device_us:.0%} of the GPU's time ran in CUDA-graph replays: their "
            "kernels carry no op and no arguments, so the roofline cannot place them and they "
            "count as uncosted; `membound diagnose` costs them from the graphs' captures "
            "when they happen after it starts, before its recorded steps"
        )
    if trace.has_gpu and op_source is trace and not (trace.cpu.kind == CPU_OP).any():
        notes.append(
            "the trace recorded GPU activity only and no ops pass is beside it: kernels are "
            "not joined to ops, so nothing is placed on the roofline"
        )
    over = above_roof_note(rows)
    if over:
        notes.append(over)
    if trace.has_gpu and calls and not any(r.exact_cost for r in rows):
        notes.append("no op recorded shapes the cost model knows: record with record_shapes=True")
    norm_cost = meta.get("norm_host_cost") if isinstance(meta, dict) else None
    ctx = AnalysedTrace(
        trace, timeline, steps, calls, rows, ceilings, notes, timing, frameworks, op_steps,
        norm_host_cost=norm_cost if isinstance(norm_cost, dict) else None,
        profiler_cost_us=profiler_cost.of(meta), op_trace=op_source,
        launch_host_us=profiler_cost.launch_us(meta),
        autocast_factor=profiler_cost.autocast_factor(meta),
        loader_release_moved_ms=loader_probe.release_moved_ms(meta),
        layout_ratios=layout_probe.ratios(meta),
        dtype_cost=dtype_probe.of(meta),
        loader_cpu=loader_cpu.of(meta, timing.unprofiled_phase) if timing is not None else None,
    )  # fmt: skip
    findings = run_rules(ctx) if trace.has_gpu and steps else []
    step = timing.unprofiled_median_ms if timing is not None else None
    gpu_curve = None
    if any(f.code in gpu_whatif.GPU_WORK for f in findings):
        gpu_curve = gpu_whatif.curve(ctx)
        if gpu_curve is not None:
            findings = remedies.through_curve(findings, gpu_curve, step)
            notes.append(gpu_whatif.note(gpu_curve))
    # a worker-bound loader's wait a step, which takes up what compile or a fused optimizer
    # changes of the step's own work, a saving or a loss (`analysis.pacing`)
    wait = pacing.loader_wait_ms(findings)
    if any("compile" in remedies.remedies_of(f.code, f.evidence) for f in findings):
        # compile's own what-if, kept beside the GPU one (`remedies.compile_curve_of`)
        compiled = compile_whatif.curve(ctx)
        if compiled is not None:
            compiled = compile_whatif.behind_loader(compiled, wait)
            gpu_curve = {**(gpu_curve or {}), "compile": compiled}
    fused = optimizer_whatif.of(ctx) if findings else None
    if fused is not None:
        # a fused optimizer's own what-if, kept beside the others (`remedies.fused_of`)
        if wait and wait > 0:
            fused = {**fused, "saving_ms": pacing.behind(fused["saving_ms"], wait),
                     "loader_wait_ms": round(wait, 4)}  # fmt: skip
        gpu_curve = {**(gpu_curve or {}), "fused_optimizer": fused}
        notes.append(optimizer_whatif.note(fused))
        if fused.get("grad_scaler_sync") and fused.get("sync_ms"):
            findings = host_sync.priced_by_replay(findings, float(fused["sync_ms"]), step)
    # fp16 autocast's convolutions and matmuls at the speed bf16 measured here, replayed
    # (`analysis.dtype_whatif`); the bf16 remedy adds it, signed,
    # and NCHW convolutions in channels_last: the channels_last remedy adds that one
    for name in dtype_whatif.WHAT_IFS if trace.has_gpu and steps else ():
        w = dtype_whatif.of(ctx, name)
        if w is not None:
            gpu_curve = {**(gpu_curve or {}), name: w}
            notes.append(dtype_whatif.note(w))
    findings, paced = pacing.behind_loader(findings, step)
    if paced:
        notes.append(paced)
        findings = ranked(findings)
    if remedies.compile_curve_of(gpu_curve):
        compile_whatif.say_loss(findings, remedies.remedies(findings, step, gpu_curve))
    again = recompute.of(ctx) if trace.has_gpu else None
    if again is not None:
        notes.append(recompute.note(again))
    replayed = norm_whatif.of(ctx) if findings else None
    if replayed is not None:
        notes.append(norm_whatif.note(replayed))
    if remedies.kernels_of(gpu_curve, "bf16") is None and any(
        "bf16" in remedies.remedies_of(f.code, f.evidence) for f in findings
    ):
        caveat = depthwise.bf16_note(ctx)
        if caveat:
            notes.append(caveat)
    if isinstance(meta, dict) and "step_source" in meta:  # what membound's capture said
        notes.extend(notes_from_meta(meta))
    n = max(len(steps), 1)
    wall = sum(s.wall_ms for s in steps)
    busy = sum(s.busy_ms for s in steps)
    return Analysis(
        trace_path=trace.path,
        device_name=trace.device_name,
        has_gpu=trace.has_gpu,
        ceilings=ceilings,
        ceilings_source=source,
        ceilings_note=note,
        steps=steps,
        gpu_busy_fraction=(busy / wall if wall > 0 else None) if trace.has_gpu else None,
        idle_breakdown={c: sum(s.idle_by_cause.get(c, 0.0) for s in steps) / n for c in IDLE_CAUSES}
        if trace.has_gpu
        else {},
        # the report's rows are per the timeline's steps, like every other total
        ops=[r.per(op_steps / len(steps)) for r in rows]
        if op_source is not trace and steps
        else rows,
        findings=findings,
        notes=notes,
        samples_per_step=_samples(meta),
        step_marked=marked,
        timing=timing,
        ceilings_origin=ceilings_origin if ceilings is not None else None,
        gpu_whatif=gpu_curve,
    )


def merge(results: list[Analysis]) -> Analysis:
    """Pool the steps of several analyses (e.g. one trace per rank or per window): steps
    concatenated, op rows summed by name, findings of one code averaged per step."""
    steps = [s for a in results for s in a.steps]
    n = max(len(steps), 1)
    wall = sum(s.wall_ms for s in steps)
    busy = sum(s.busy_ms for s in steps)
    rows: dict[str, OpRow] = {}
    for a in results:
        for r in a.ops:
            if r.name not in rows:
                rows[r.name] = dataclasses.replace(r)
            else:
                m = rows[r.name]
                m.calls += r.calls
                m.device_ms += r.device_ms
                m.flops += r.flops
                m.bytes += r.bytes
    # each trace's device time (what its rows' shares are of), pooled: the shares of the
    # pooled rows are of that, so time no op was charged with stays uncosted
    device = sum(_device_ms(a) for a in results)
    for m in rows.values():
        m.share_of_gpu_time = m.device_ms / device if device > 0 else 0.0
    by_code: dict[str, Finding] = {}
    for a in results:
        for f in a.findings:
            weight = len(a.steps) / n
            if f.code not in by_code:
                by_code[f.code] = dataclasses.replace(
                    f, time_lost_ms_per_step=f.time_lost_ms_per_step * weight, spans=list(f.spans)
                )
            else:
                by_code[f.code].time_lost_ms_per_step += f.time_lost_ms_per_step * weight
    timing = StepTiming.pool([a.timing for a in results])
    step = timing.unprofiled_median_ms if timing is not None else (wall / n if n else 0.0)
    for f in by_code.values():
        f.share_of_step = f.time_lost_ms_per_step / step if step else 0.0
        capped(f)
        f.expected_step_ms_after_fix = max(step - f.time_lost_ms_per_step, 0.0)
    first = results[0]
    return Analysis(
        trace_path=", ".join(a.trace_path for a in results),
        device_name=first.device_name,
        has_gpu=any(a.has_gpu for a in results),
        ceilings=first.ceilings,
        ceilings_source=first.ceilings_source,
        ceilings_note=first.ceilings_note,
        steps=steps,
        gpu_busy_fraction=busy / wall if wall > 0 and first.has_gpu else None,
        idle_breakdown={
            c: sum(s.idle_by_cause.get(c, 0.0) for s in steps) / n for c in IDLE_CAUSES
        },
        ops=sorted(rows.values(), key=lambda r: r.device_ms, reverse=True),
        findings=ranked(by_code.values()),
        notes=[f"{len(results)} traces pooled"] + sorted({n for a in results for n in a.notes}),
        step_marked=all(a.step_marked for a in results),
        timing=timing,
        # pooled traces of one run (ranks, or one trace in parts) share it; else unknown
        samples_per_step=first.samples_per_step
        if len({a.samples_per_step for a in results}) == 1
        else None,
    )


def _device_ms(a: Analysis) -> float:
    """The device time an analysis's op rows are shares of (their `share_of_gpu_time`'s
    denominator), from the rows themselves."""
    ms = sum(r.device_ms for r in a.ops)
    share = sum(r.share_of_gpu_time for r in a.ops)
    return ms / share if share > 0 else ms


def _samples(meta) -> float | None:
    """The capture's DataLoader samples per step, when it is a sane number."""
    v = meta.get("samples_per_step") if isinstance(meta, dict) else None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if 0 < v < 1e12 else None
