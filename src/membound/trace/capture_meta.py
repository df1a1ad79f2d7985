"""The capture meta (`capture.json`, `capture.rank{R}.json`): what a capture writes beside its
trace, and the sentences a report takes from it.

The meta says how the capture went (the step source, the steps asked for, recorded and cut
short, how the run ended), what it wrote besides the timeline (the ops pass, the step marks,
the CUDA-graph captures, inductor kernels' launch parameters), membound's own step timer and the
process's resource use per phase. It is written when the recorded steps are done, when the
steps timed after them are, and when the capture stops, so a run that ends early still leaves
one. `read_meta` finds and reads it beside a trace.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from membound.trace import children


def build_meta(capture: Any, argv: list[str]) -> dict[str, Any]:
    """The meta a capture (a `trace.capture.Capture`) writes beside its trace, as it stands
    now; `argv`: what the process ran, as the capture sees it."""
    return {
        "trace": capture.trace_path.name if capture.written else None,
        "rank": capture.rank,  # [distributed] None outside torchrun
        "step_source": capture.source,
        "steps_requested": capture.steps,
        "steps_captured": capture.steps_captured if capture.written else 0,
        "wait": capture.wait,
        "warmup": capture.warmup,
        "complete": capture.complete,
        # the complete recorded steps and the one cut short, by ProfilerStep#N number
        "recorded_steps": capture.recorded_steps,
        "partial_step": capture.partial_step,
        "ended": capture.ended,  # how the run ended, when not by itself
        "step_marks": capture.steps_path.name,
        "samples_per_step": capture.samples_per_step,
        # [two-pass] the timeline pass recorded GPU activity only, with membound's marks;
        # the ops pass (CPU ops and shapes) is for the roofline alone
        "timeline": "gpu+host marks" if capture.two_pass else "single pass",
        # kineto options asked for through KINETO_CONFIG (`trace.kineto_config`); None: none
        "kineto_config": getattr(capture, "kineto_config", None),
        "host_marks": getattr(capture, "host_marks", None),
        "ops_trace": capture.ops_path.name if capture.ops_written else None,
        # [ms] per complete step by phase: membound's host step timer (no sync)
        "step_times_ms": capture.clock.durations_ms(),
        # [ms] the same steps on the GPU's clock (events on the loop's stream), where the GPU
        # had passed both ends; {} without CUDA
        "gpu_step_times_ms": capture.clock.gpu_durations_ms(),
        # per unprofiled phase, what the process (all threads) and the training thread
        # did per step: CPU time, page faults, context switches
        "process_per_step": capture.clock.usage_per_step("process"),
        "thread_per_step": capture.clock.usage_per_step("thread"),
        # per timed phase, the child processes' CPU per step (a DataLoader's workers), how
        # many there were and how many cores they kept busy; and the cores the process may
        # use (`trace.children`): whether more workers could have had a core
        "children_per_step": capture.clock.children_per_step(),
        "host_cores": children.usable_cores(),
        # --syncs sleep or sleep-profiled: "ok" where the run's CUDA syncs slept
        # (`trace.sync_mode`), else why not; None where not asked for
        "sleeping_syncs": getattr(capture, "sleeping_syncs_state", None),
        # the phases whose syncs slept (`trace.step_clock.PHASES`): all with --syncs sleep;
        # with sleep-profiled the "slept" steps added to the wait and the recorded passes
        "sleeping_syncs_phases": list(getattr(capture, "slept_phases", ()) or ()) or None,
        # TEARDOWN_CUPTI as the capture ran (None: unset, or no CUDA capture)
        "cupti_teardown": capture.cupti_teardown,
        # which CUDA API calls the timeline pass recorded ("all", or "launches": those
        # the timeline reads) and what switching the others off did (`trace.cupti_api`)
        "api_records": {"mode": capture.api_records, **(capture.api_filter or {})}
        if capture.two_pass
        else None,
        # [graphs] CUDA-graph captures recorded with CPU ops, in capture order
        "graph_captures": capture.graph_captures,
        # [inductor] each compiled Triton kernel's launch parameters (in_ptr0, out_ptr0,
        # ..., xnumel), read from its source at the end of the ops pass
        "kernel_args": capture.kernel_args,
        "argv": argv,
        "frameworks": frameworks(),
        "notes": capture.notes,
    }


def shortfall_note(capture: Any) -> str:
    """Why a capture (a `trace.capture.Capture`) recorded fewer steps than it was asked for."""
    if capture.source is None and capture.ended is not None:
        return f"the script {capture.ended} before its first step: nothing was recorded."
    if capture.source is None:
        return (
            "no step boundary was seen (no optimizer step, no DataLoader batch, no module's "
            "zero_grad): call membound.step() once per iteration."
        )
    if capture.steps_captured == 0 and not capture.written:
        return (
            f"the run ended after {capture.steps_taken} step(s), before recording began "
            f"(wait {capture.wait} + warmup {capture.warmup}); run more steps or lower --wait/--warmup."
        )
    partial = capture.partial_step
    return f"the run ended after {capture.steps_captured} of {capture.steps} recorded step(s)" + (
        f"; step {partial + 1} was cut short and is left out."  # 1-based, as the user counts
        if partial is not None
        else "."
    )


_SOURCES = {
    "explicit": "explicit membound.step() calls",
    "optimizer": "optimizer steps",
    "dataloader": "DataLoader batches (no optimizer step was seen)",
    "zero_grad": "the model's zero_grad calls (no optimizer step was seen)",
}


def recorded_launches_only(meta: Any) -> bool:
    """Whether the capture's timeline pass recorded only the API calls membound reads: its
    meta asked for `launches` and the filter applied (a failed filter recorded every call)."""
    api = meta.get("api_records") if isinstance(meta, dict) else None
    return isinstance(api, dict) and api.get("mode") == "launches" and bool(api.get("applied"))


def notes_from_meta(meta: dict[str, Any]) -> list[str]:
    """The capture's sentences for a report's notes, from its meta (`capture.json`): how many
    steps it kept, where the boundaries came from, and what it noticed."""
    source = _SOURCES.get(meta.get("step_source"), "nothing (no boundary seen)")
    skipped = int(meta.get("wait") or 0) + int(meta.get("warmup") or 0)
    head = (
        f"captured {meta.get('steps_captured', 0)} step(s) after skipping {skipped}; "
        f"step boundaries from {source}."
    )
    out = [head]
    if recorded_launches_only(meta):
        api = meta["api_records"]
        out.append(
            f"the timeline pass recorded only the CUDA API calls membound reads (launches, "
            f"memcpys, memsets, syncs): {api.get('runtime_off', 0)} runtime and "
            f"{api.get('driver_off', 0)} driver functions were not recorded."
        )
    notes = meta.get("notes")
    return [*out, *(str(n) for n in notes)] if isinstance(notes, list) else out


#: training frameworks whose own switches a fix can name (`analysis.fixes`)
FRAMEWORKS = ("lightning", "pytorch_lightning", "transformers", "accelerate", "timm", "torchvision")


def frameworks() -> list[str]:
    """The frameworks this process imported (the script's, seen from inside it)."""
    return [name for name in FRAMEWORKS if name in sys.modules]


def _stored_names(rank: int | None) -> tuple[str, ...]:
    """The names a capture's timeline may be stored under since: as written, recompressed to
    xz, decompressed (in that order)."""
    from membound.trace.distributed import trace_name

    written = trace_name(rank).removesuffix(".gz")
    return tuple(written + suffix for suffix in (".gz", ".xz", ""))


def timeline_in(folder: str | os.PathLike, rank: int | None = None) -> Path:
    """The timeline trace membound's capture wrote in `folder` (`trace.json.gz`), or the same
    recompressed to xz or decompressed (`read_meta` finds the meta beside each); the name as
    written where none of them is there."""
    names = _stored_names(rank)
    for name in names:
        path = Path(folder) / name
        if path.is_file():
            return path
    return Path(folder) / names[0]


def read_meta(trace_path: str | os.PathLike) -> dict[str, Any] | None:
    """The capture meta (`capture.json`, `capture.rank{R}.json`) written beside a trace by
    membound's capture, or None (a trace from elsewhere, or an unreadable meta)."""
    from membound.trace.distributed import meta_name, rank_of_path

    path = Path(trace_path)
    rank = rank_of_path(path)
    # the name membound's capture gave it, recompressed or not (`trace.json.xz`: a third
    # smaller, as the test fixtures keep theirs; `trace.json`: decompressed)
    if path.name not in _stored_names(rank):
        return None  # not a file membound's capture named
    try:
        meta = json.loads((path.parent / meta_name(rank)).read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None
