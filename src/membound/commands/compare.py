"""`membound compare BEFORE.json AFTER.json`: did the fix work? Step time, GPU busy and the
time each finding costs, before vs after, from two report JSONs (schema 1, as written by
`membound analyze --json` / `membound diagnose --json`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from membound.errors import BadInput

HELP = "compare two report JSONs (before/after a fix): step time, GPU busy, time lost per finding"


def add_arguments(parser) -> None:
    parser.add_argument("before", metavar="BEFORE.json", help="report JSON of the run before")
    parser.add_argument("after", metavar="AFTER.json", help="report JSON of the run after")
    parser.add_argument("--json", metavar="F", help="also write the comparison as JSON to F")


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
    rows = report["steps"].get("per_step") or []
    wall = sum(r.get("wall_ms") or 0.0 for r in rows)
    if wall <= 0 or report.get("gpu_busy_fraction") is None:
        return None
    return sum(r.get("kernel_busy_ms") or 0.0 for r in rows) / wall


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


def _ms(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def _pct(v) -> str:
    return "-" if v is None else f"{v:.0%}"


def render(cmp: dict, console=None, *, before_label="before", after_label="after") -> None:
    """Print the comparison: one summary line, the metrics table, the findings table."""
    from rich.console import Console
    from rich.table import Table

    out = console or Console()
    step = cmp["step_ms"]
    busy = cmp["gpu_busy_fraction"]
    t = Table(title=f"{before_label} → {after_label}", title_justify="left")
    for col in ("", before_label, after_label, "saving"):
        t.add_column(col, justify="right" if col else "left")
    t.add_row(
        "step time (median ms)",
        _ms(step["before"]),
        _ms(step["after"]),
        "-" if step["saved"] is None else f"{step['saved']:.3f} ms ({cmp['speedup']:.2f}x)",
    )
    gain = None if None in (busy["before"], busy["after"]) else busy["after"] - busy["before"]
    t.add_row(
        "GPU busy",
        _pct(busy["before"]),
        _pct(busy["after"]),
        "-" if gain is None else f"{gain * 100:+.0f} points",
    )
    kb = cmp["kernel_busy_fraction"]
    if None not in (kb["before"], kb["after"]):
        t.add_row(
            "GPU computing (kernels)",
            _pct(kb["before"]),
            _pct(kb["after"]),
            f"{(kb['after'] - kb['before']) * 100:+.0f} points",
        )
    for f in cmp["findings"]:
        state = (
            "resolved"
            if f["code"] in cmp["resolved"]
            else "new"
            if f["code"] in cmp["new"]
            else f"{f['saved_ms']:.3f} ms saved"
            if f["saved_ms"] >= 0
            else f"{-f['saved_ms']:.3f} ms worse"
        )
        t.add_row(f"lost to {f['code']} (ms/step)", _ms(f["before_ms"]), _ms(f["after_ms"]), state)
    out.print(t)
    if False in cmp["steps_marked"].values():
        out.print(
            "note: a trace without step markers counts its whole window as one step, so "
            "'step time' there is the window's time."
        )
    out.print(
        f"findings resolved: {', '.join(cmp['resolved']) or 'none'}; "
        f"new: {', '.join(cmp['new']) or 'none'}"
    )


def run(args) -> int:
    before, after = load_report(args.before), load_report(args.after)
    cmp = compare(before, after)
    render(cmp, before_label=Path(args.before).name, after_label=Path(args.after).name)
    if args.json:
        Path(args.json).write_text(json.dumps(cmp, indent=2) + "\n")
    return 0
