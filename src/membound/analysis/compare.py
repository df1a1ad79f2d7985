"""Did the fix work? Two report JSONs (schema 1, as `membound analyze --json` / `membound
diagnose --json` write them) compared: step time, GPU busy and computing, and the time each
finding costs, before vs after, as plain data (`report.compare` draws it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from membound.analysis.result import computing_fraction
from membound.errors import BadInput


def load_report(path: str | Path) -> dict[str, Any]:
    """A report JSON, checked for the keys the comparison reads; BadInput otherwise."""
    p = Path(path)
    hint = "pass a file written by `membound analyze --json` or `membound diagnose --json`."
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInput(f"{p} does not exist; {hint}") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BadInput(f"{p} is not readable JSON ({type(exc).__name__}); {hint}") from None
    if not isinstance(data, dict) or "schema" not in data:
        raise BadInput(f"{p} is not a membound report (no 'schema' key); {hint}")
    if data["schema"] != 1:
        raise BadInput(f"{p} has report schema {data['schema']!r}; this membound reads schema 1.")
    steps = data.get("steps")
    if not isinstance(steps, dict) or not isinstance(data.get("findings"), list):
        raise BadInput(f"{p} lacks 'steps' or 'findings'; {hint}")
    for f in data["findings"]:
        if not isinstance(f, dict) or "code" not in f or "time_lost_ms_per_step" not in f:
            raise BadInput(f"{p} has a finding without 'code' or 'time_lost_ms_per_step'; {hint}")
    return data


def _lost_by_code(report: dict) -> dict[str, float]:
    """Time lost per step by finding code (a code may appear once per op: summed)."""
    out: dict[str, float] = {}
    for f in report["findings"]:
        out[f["code"]] = out.get(f["code"], 0.0) + float(f["time_lost_ms_per_step"] or 0.0)
    return out


def _kernel_busy(report: dict) -> float | None:
    """Share of wall time spent in kernels, from the per-step rows (None if absent)."""
    if report.get("gpu_busy_fraction") is None:
        return None
    rows = report["steps"].get("per_step") or []
    return computing_fraction(
        [r.get("wall_ms") or 0.0 for r in rows], [r.get("kernel_busy_ms") or 0.0 for r in rows]
    )


def compare(before: dict, after: dict) -> dict[str, Any]:
    """The comparison as plain data: metrics before/after/saving, findings per code, resolved
    (present before, gone after) and new (absent before) codes."""
    b_step, a_step = before["steps"].get("median_step_ms"), after["steps"].get("median_step_ms")
    b_busy, a_busy = before.get("gpu_busy_fraction"), after.get("gpu_busy_fraction")
    lost_b, lost_a = _lost_by_code(before), _lost_by_code(after)
    codes = sorted(
        set(lost_b) | set(lost_a), key=lambda c: -max(lost_b.get(c, 0), lost_a.get(c, 0))
    )
    findings = [
        {
            "code": c,
            "before_ms": lost_b.get(c),
            "after_ms": lost_a.get(c),
            "saved_ms": lost_b.get(c, 0.0) - lost_a.get(c, 0.0),
        }
        for c in codes
    ]
    saved = b_step - a_step if b_step is not None and a_step is not None else None
    return {
        "before": before.get("trace"),
        "after": after.get("trace"),
        "step_ms": {"before": b_step, "after": a_step, "saved": saved},
        "speedup": b_step / a_step if saved is not None and a_step else None,
        "gpu_busy_fraction": {"before": b_busy, "after": a_busy},
        "kernel_busy_fraction": {"before": _kernel_busy(before), "after": _kernel_busy(after)},
        "findings": findings,
        "resolved": [c for c in codes if c in lost_b and c not in lost_a],
        "new": [c for c in codes if c in lost_a and c not in lost_b],
        "steps_marked": {
            "before": before["steps"].get("marked"),
            "after": after["steps"].get("marked"),
        },
    }
