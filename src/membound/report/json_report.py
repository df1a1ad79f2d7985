"""The `--json` report: DESIGN's schema 1, stable keys (new keys may be added)."""

from __future__ import annotations

import json
import math
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


def to_dict(analysis) -> dict[str, Any]:
    a = analysis
    c = a.ceilings
    device = {
        "name": a.device_name,
        "has_gpu": a.has_gpu,
        "ceilings_source": a.ceilings_source,
        "ceilings_note": a.ceilings_note,
        "ceilings": c.to_dict() if c is not None and hasattr(c, "to_dict") else None,
    }
    steps = {
        "count": len(a.steps),
        "median_step_ms": a.median_step_ms,
        "mean_step_ms": a.mean_step_ms,
        "marked": a.step_marked,
        "per_step": [
            {
                "index": s.index,
                "start_us": s.start_us,
                "end_us": s.end_us,
                "wall_ms": s.wall_ms,
                "busy_ms": s.busy_ms,
                "kernel_busy_ms": s.kernel_busy_ms,
                "idle_ms": s.idle_ms,
                "idle_by_cause": s.idle_by_cause,
                "kernels": s.kernels,
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
            "gpu_busy_fraction": a.gpu_busy_fraction,
            "idle_breakdown": a.idle_breakdown,
            "findings": [f.to_dict() for f in a.findings],
            "ops": [r.to_dict() for r in a.ops],
            "notes": a.notes,
        }
    )


def write(analysis, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_dict(analysis), indent=2) + "\n")
    return path
