"""The `--json` files: the report (DESIGN's schema 1, stable keys, new keys may be added) and
`membound roofline --json`'s ceilings document (same schema number, same `device` shape)."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

SCHEMA = 1


def _clean(x: Any) -> Any:
    """JSON-safe: NaN/inf -> None, NumPy scalars -> Python, tuples -> lists."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if hasattr(x, "item") and not isinstance(x, (str, bytes)):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def to_dict(result) -> dict[str, Any]:
    """The report JSON of one trace's `Analysis`, or of a `RankedAnalysis` (the merged
    analysis plus a `ranks` section)."""
    if hasattr(result, "merged"):
        return _ranked(result)
    a = result
    c = a.ceilings
    device = {
        "name": a.device_name,
        "has_gpu": a.has_gpu,
        "ceilings_source": a.ceilings_source,
        "ceilings_note": a.ceilings_note,
        "ceilings_origin": a.ceilings_origin,
        "ceilings": c.to_dict() if c is not None and hasattr(c, "to_dict") else None,
    }
    steps = {
        "count": len(a.steps),
        "median_step_ms": a.median_step_ms,
        "mean_step_ms": a.mean_step_ms,
        # membound's own step timer (no profiler, no sync); None for traces from elsewhere
        "unprofiled_median_ms": a.unprofiled_step_ms,
        "profiled_median_ms": a.profiled_step_ms,
        # the unprofiled steps' mean: above the median where some steps ran far longer
        "unprofiled_mean_ms": a.timing.unprofiled_mean_ms if a.timing else None,
        "unprofiled_before_median_ms": a.timing.before_median_ms if a.timing else None,
        "unprofiled_after_median_ms": a.timing.after_median_ms if a.timing else None,
        # "gpu": the unprofiled steps were read on the GPU's clock (events on the loop's
        # stream), "host": on the host's; where "gpu", the host clock's median beside it
        "unprofiled_clock": ("gpu" if a.timing.host_ms else "host") if a.timing else None,
        "unprofiled_host_median_ms": statistics.median(a.timing.host_ms)
        if a.timing and a.timing.host_ms
        else None,
        # the training thread's CPU ms a step by phase (unprofiled, profiled, after)
        "thread_cpu_ms": dict(a.timing.thread_cpu_ms) if a.timing else None,
        # the same with PyTorch's autograd threads (backward's host work on CUDA), where read
        "launchers_cpu_ms": dict(a.timing.launchers_cpu_ms) if a.timing else None,
        # how far the host's step marks ran ahead of the GPU's steps (ms)
        "host_lead_max_ms": max((s.host_lead_ms for s in a.steps), default=0.0),
        "marked": a.step_marked,
        # DataLoader samples per step (membound's capture); compare's per-sample throughput
        "samples_per_step": getattr(a, "samples_per_step", None),
        # CPU-only traces: no GPU, so no busy/idle (a CPU step is not 100% idle)
        "per_step": [
            {
                "index": s.index,
                "start_us": s.start_us,
                "end_us": s.end_us,
                "wall_ms": s.wall_ms,
                "busy_ms": s.busy_ms if a.has_gpu else None,
                "kernel_busy_ms": s.kernel_busy_ms if a.has_gpu else None,
                "idle_ms": s.idle_ms if a.has_gpu else None,
                "idle_by_cause": s.idle_by_cause if a.has_gpu else {},
                "kernels": s.kernels,
                "host_start_us": s.host_start_us,
                "host_lead_ms": s.host_lead_ms,
                "rank": s.rank,
            }
            for s in a.steps
        ],
    }
    return _clean(
        {
            "schema": SCHEMA,
            "trace": a.trace_path,
            "device": device,
            "steps": steps,
            "profiler_overhead_fraction": a.profiler_overhead_fraction,
            "gpu_busy_fraction": a.gpu_busy_fraction,
            "gpu_computing_fraction": a.gpu_computing_fraction,
            # shares of the reference step (the unprofiled one when timed)
            "step_shares": a.step_shares,
            "idle_breakdown": a.idle_breakdown,
            "findings": [f.to_dict() for f in a.findings],
            # fixes ranked by what they save; `findings` index the list above
            "remedies": [r.to_dict() for r in a.remedies],
            # the step's saving against kernel time removed (analysis/gpu_whatif.py)
            "gpu_whatif": getattr(a, "gpu_whatif", None),
            "ops_costed_fraction": a.ops_costed_fraction,
            "ops": [r.to_dict() for r in a.ops],
            "notes": a.notes,
        }
    )


def write(result, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_dict(result), indent=2) + "\n")
    return path


def _ranked(ra) -> dict[str, Any]:
    """The schema-1 report of the merged analysis plus a `ranks` section."""
    out = to_dict(ra.merged)
    out["ranks"] = _clean(
        {
            "world_size": ra.world_size,
            "backend": ra.backend,
            "matched_steps": ra.matched_steps,
            "per_rank": [
                {
                    "rank": r.rank,
                    "trace": r.trace,
                    "steps": r.steps,
                    "median_step_ms": r.median_step_ms,
                    "mean_step_ms": r.mean_step_ms,
                    "gpu_busy_fraction": r.gpu_busy_fraction,
                    "compute_ms_per_step": r.compute_ms_per_step,
                    "wait_ms_per_step": r.wait_ms_per_step,
                    "comm_ms_per_step": r.comm_ms_per_step,
                    "exposed_comm_ms_per_step": r.exposed_comm_ms_per_step,
                    "collectives_per_step": r.collectives_per_step,
                    "late_fraction": r.late_fraction,
                }
                for r in ra.ranks
            ],
            "stragglers": [
                {
                    "rank": s.rank,
                    "held_back_ms_per_step": s.held_back_ms_per_step,
                    "share_of_step": s.share_of_step,
                    "others_wait_ms_per_step": s.others_wait_ms_per_step,
                    "late_fraction": s.late_fraction,
                    "method": s.method,
                }
                for s in ra.stragglers
            ],
            "collectives": ra.collectives,
            "interconnect": ra.interconnect,
            "interconnect_source": ra.interconnect_source,
            "notes": ra.notes,
        }
    )
    return out


def ceilings_document(ceilings) -> dict:
    """`membound roofline --json`'s document. `device` has the same shape as the analysis report's `device` key
    (name, where the ceilings came from, the ceilings themselves), so `membound analyze
    --ceilings F` and the report read either file the same way."""
    return {
        "schema": SCHEMA,
        "device": {
            "name": ceilings.name,
            "kind": ceilings.device,
            "ceilings_source": ceilings.source,
            "ceilings": ceilings.to_dict(),
        },
    }


def write_ceilings(ceilings, path) -> Path:
    path = Path(path)
    data = ceilings_document(ceilings)
    try:
        import orjson

        text = orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode()
    except ImportError:
        text = json.dumps(data, indent=2)
    path.write_text(text + "\n")
    return path
