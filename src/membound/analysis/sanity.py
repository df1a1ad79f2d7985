"""What every report must satisfy, whatever its input: the invariants a fuzz suite asserts.

`check_report(report)` takes a report dict (`report.json_report.to_dict`, or the JSON read
back) and returns its violations, one line each (`path: what (value)`); an empty list is a
sane report. It checks the numbers by what their key says they are:

- every number is finite (the JSON writer turns NaN into null, so a null where a figure is
  required is a violation too: `REQUIRED`);
- a **fraction or share** (`*_fraction`, `*share*`, the `step_shares` values) lies in 0..1,
  except the ratios of a measured rate to a ceiling (`CEILING_RATIOS`: an op with its data
  in L2 runs above the HBM roof, shown as >100%), which are only >= 0, and the profiler's
  overhead (a relative change, > -1);
- a **time** (`*_ms`, `*_us`, `*_ms_per_step`, the ms of `idle_breakdown` and
  `idle_by_cause`) is >= 0, except timestamps on the trace's clock (`TIMESTAMPS`);
- counts (`count`, `calls`, `kernels`) are >= 0;
- and across fields: a step's busy, kernel busy and idle each within its wall time (kernel
  busy within busy), the step shares adding up to 1, the ops' shares of GPU time to at most
  1, a finding's saving within the step it refers to.

Pure: no I/O, no analysis; plain dicts, lists and numbers in.
"""

from __future__ import annotations

import math
from typing import Any

#: rates measured against a ceiling: above 1 means faster than the roof (L2-resident data)
CEILING_RATIOS = frozenset(
    {"achieved_bandwidth_fraction", "achieved_flops_fraction", "fraction_of_attainable"}
)
#: relative changes, not shares: > -1 and finite
RELATIVE = frozenset({"profiler_overhead_fraction"})
#: instants on the trace's clock (any finite value)
TIMESTAMPS = frozenset(
    {"start_us", "end_us", "host_start_us", "host_end_us", "first_kernel_us", "last_kernel_us"}
)
#: predicted changes of the step, which a fix that costs time makes negative (the norm
#: what-if's replayed savings: `analysis.norm_whatif`)
SIGNED = frozenset({"swap_norms_ms_per_step", "fused_add_norm_ms_per_step"})
#: (dict, key) of the other signed predictions: a remedy's saving and share (compile's replay
#: predicts a loss where fusion does not pay its runtime's cost: `analysis.compile_whatif`),
#: that replay's own curve, and the what-ifs of kernels timed after the script in another
#: dtype or layout (`analysis.dtype_whatif`: the DDPM U-Net's channels_last, EfficientNet's
#: bf16 lose time)
SIGNED_IN = frozenset(
    {("remedies", "saving_ms_per_step"), ("remedies", "share_of_step"), ("compile", "saving_ms")}
    | {
        (name, key)
        # `dtype_whatif.WHAT_IFS`'s names (written out: this module imports no analysis)
        for name in ("bf16_kernels", "channels_last_kernels", "bf16_channels_last_kernels")
        for key in ("saving_ms", "convolutions_saving_ms")
    }
)
COUNTS = frozenset({"count", "calls", "kernels", "steps", "world_size", "matched_steps"})
#: figures a report must carry as numbers (path patterns: `[]` any list index)
REQUIRED = (
    "steps.count",
    "steps.median_step_ms",
    "steps.mean_step_ms",
    "steps.per_step[].wall_ms",
    "findings[].time_lost_ms_per_step",
    "findings[].share_of_step",
    "ops[].device_ms",
    "ops[].calls",
    "ops[].share_of_gpu_time",
)
#: slack for sums of rounded floats
EPS = 1e-6


def check_report(report: Any) -> list[str]:
    """The violations of a report dict (module docstring); [] when it is sane."""
    if not isinstance(report, dict):
        return [f"report: not a dict ({type(report).__name__})"]
    out: list[str] = []
    _walk(report, "", out)
    _required(report, out)
    _across(report, out)
    return out


def _walk(x: Any, path: str, out: list[str]) -> None:
    if isinstance(x, dict):
        for k, v in x.items():
            _walk(v, f"{path}.{k}" if path else str(k), out)
        return
    if isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            _walk(v, f"{path}[{i}]", out)
        return
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return
    problem = _problem(path, float(x))
    if problem:
        out.append(f"{path}: {problem} ({x!r})")


def _key(path: str) -> tuple[str, str]:
    """(the last key, the key of the dict holding it) of a path like `a.b[3].c`."""
    parts = [p.split("[")[0] for p in path.split(".")]
    return parts[-1], parts[-2] if len(parts) > 1 else ""


def _problem(path: str, v: float) -> str | None:
    if not math.isfinite(v):
        return "not finite"
    key, parent = _key(path)
    if (parent, key) in SIGNED_IN:
        if key == "share_of_step" and not -1.0 - EPS <= v <= 1.0 + EPS:
            return "a share outside -1..1"
        return None
    if parent in ("step_shares",):
        return None if 0.0 <= v <= 1.0 + EPS else "a share outside 0..1"
    if parent in ("idle_breakdown", "idle_by_cause"):
        return None if v >= 0 else "a negative time"
    if key in RELATIVE:
        return None if v > -1.0 else "a relative change of -100% or less"
    if key in CEILING_RATIOS:
        return None if v >= 0 else "a negative fraction of a ceiling"
    if key.endswith("_fraction") or "share" in key:
        return None if 0.0 <= v <= 1.0 + EPS else "a fraction outside 0..1"
    if key in TIMESTAMPS or key in SIGNED:
        return None
    if key.endswith(("_ms", "_us", "_ms_per_step", "_us_per_kernel", "_per_step")):
        return None if v >= 0 else "a negative time"
    if key in COUNTS:
        return None if v >= 0 else "a negative count"
    return None


def _get(report: dict, pattern: str) -> list[tuple[str, Any, bool]]:
    """(path, value, present) for each place a `REQUIRED` pattern names."""
    found = [("", report, True)]
    for part in pattern.split("."):
        name, many = (part[:-2], True) if part.endswith("[]") else (part, False)
        nxt = []
        for path, node, _ in found:
            if not isinstance(node, dict):
                continue
            p = f"{path}.{name}" if path else name
            if name not in node:
                nxt.append((p, None, False))
                continue
            v = node[name]
            if many:
                if isinstance(v, list):
                    nxt += [(f"{p}[{i}]", item, True) for i, item in enumerate(v)]
            else:
                nxt.append((p, v, True))
        found = nxt
    return found


def _required(report: dict, out: list[str]) -> None:
    for pattern in REQUIRED:
        head = pattern.split(".")[0].rstrip("[]")
        if head not in report:
            continue  # a section the report does not have (checked by whoever needs it)
        for path, v, present in _get(report, pattern):
            if not present or v is None:
                out.append(f"{path}: missing or null where a number is required")
            elif isinstance(v, bool) or not isinstance(v, (int, float)):
                out.append(f"{path}: not a number ({type(v).__name__})")


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


def _across(report: dict, out: list[str]) -> None:
    steps = report.get("steps")
    rows = steps.get("per_step") if isinstance(steps, dict) else None
    for i, s in enumerate(rows if isinstance(rows, list) else []):
        if not isinstance(s, dict):
            continue
        wall, busy = _num(s.get("wall_ms")), _num(s.get("busy_ms"))
        kernel, idle = _num(s.get("kernel_busy_ms")), _num(s.get("idle_ms"))
        tol = EPS * max(1.0, wall or 0.0)
        for name, v in (("busy_ms", busy), ("kernel_busy_ms", kernel), ("idle_ms", idle)):
            if wall is not None and v is not None and v > wall + tol:
                out.append(f"steps.per_step[{i}].{name}: more than the step's wall time ({v!r})")
        if busy is not None and kernel is not None and kernel > busy + tol:
            out.append(f"steps.per_step[{i}].kernel_busy_ms: more than busy_ms ({kernel!r})")
        causes = s.get("idle_by_cause")
        if wall is not None and isinstance(causes, dict):
            total = sum(v for v in map(_num, causes.values()) if v is not None)
            if total > wall + tol:
                out.append(f"steps.per_step[{i}].idle_by_cause: more than the step ({total!r})")
    shares = report.get("step_shares")
    if isinstance(shares, dict) and shares:
        values = [_num(v) for v in shares.values()]
        if None not in values and abs(sum(values) - 1.0) > 1e-3:
            out.append(f"step_shares: add up to {sum(values)!r}, not 1")
    ops = report.get("ops")
    if isinstance(ops, list):
        total = sum(
            v for r in ops if isinstance(r, dict) for v in [_num(r.get("share_of_gpu_time"))] if v
        )
        if total > 1.0 + 1e-3:
            out.append(f"ops: shares of GPU time add up to {total!r}, more than 1")
    findings = report.get("findings")
    if isinstance(findings, list):
        for i, f in enumerate(findings):
            if not isinstance(f, dict):
                out.append(f"findings[{i}]: not an object")
                continue
            after = _num(f.get("expected_step_ms_after_fix"))
            if f.get("expected_step_ms_after_fix") is not None and after is None:
                out.append(f"findings[{i}].expected_step_ms_after_fix: not a finite number")
