"""Did the fix work? Two report JSONs (schema 1, as `membound analyze --json` / `membound
diagnose --json` write them) compared as plain data (`report.compare` draws it): first the
step time, the throughput and the share of the step the GPU computes, then copying, idle, GPU
busy and the time each finding costs, before vs after.

What a comparison says and when it refuses:

- **Step time** is the unprofiled step (membound's own step timer) when both reports have
  one, else the median step of each trace (`step_ms.basis` says which). **Throughput** is
  steps/s, and samples/s where a report says how many samples a step takes
  (`samples_per_step` or `batch_size`, top level or in `steps`); without that nothing is
  per sample.
- **GPU time by op family** (`gpu_ms_by_family`): what the fix did to the GPU's work, per
  family of ops (compile: elementwise and norm time gone, inductor time new; bf16 or
  channels_last: the same families in less time).
- **Same work?** A step of a different workload is not comparable step for step. One
  warning line says what differs: the step count, the samples per step, the op set (ops
  that hold more than `OP_SET_SHARE` of one run's device time and are absent from the other),
  FLOPs or bytes per step or kernels per step (by more than `WORK_CHANGE`). A fix that
  changes storage precision or fuses ops changes bytes and kernels too: the line says so.
- **Refused** (BadInput, one line naming the file and the field): a file that is not a
  membound report, a field of the wrong type or out of range (a fraction outside 0..1, a
  negative, non-finite or absurd time), a report without steps, and the same report twice
  (the same file, or identical content). Optional sections a report lacks are None (shown
  as "-").
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from membound.analysis import fix_check
from membound.analysis.result import computing_fraction
from membound.errors import BadInput

HINT = "pass a file written by `membound analyze --json` or `membound diagnose --json`."
#: an op absent from one run that holds more than this share of the other's device time
#: makes the op sets differ
OP_SET_SHARE = 0.05
#: FLOPs, bytes or kernels per step that change by more than this make the work differ
WORK_CHANGE = 0.05
#: a step time above this is no step time (ms: a day)
MAX_STEP_MS = 86_400e3


class Report(dict):
    """A validated report dict and the file it was read from (`path`)."""

    path: Path | None = None


# ------------------------------------------------------------------------------ reading
def load_report(path: str | Path) -> Report:
    """A report JSON, checked field by field for everything the comparison reads; BadInput
    (one line naming the file and the field) otherwise."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"{p} does not exist; {HINT}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{p} is not readable JSON ({type(exc).__name__}); {HINT}") from None
    try:
        # NaN/Infinity literals become NaN, which the field checks name
        data = json.loads(text, parse_constant=lambda _: math.nan)
    except (ValueError, RecursionError) as exc:
        raise BadInput(f"{p} is not readable JSON ({type(exc).__name__}); {HINT}") from None
    report = Report(validate(data, p))
    report.path = p
    return report


def _what(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"a boolean ({v})"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, (int, float)):
        return "not finite" if not math.isfinite(v) else repr(v)
    return type(v).__name__


class _Checker:
    """Field checks of one report: each failure is a BadInput naming the file and field."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, field: str, problem: str):
        raise BadInput(f"{self.path} is not a membound report: '{field}' {problem}; {HINT}")

    def get(self, d: dict, key: str, field: str, kind: str, required: bool = False) -> Any:
        """d[key] checked as `kind`: object, list, str, bool, int (a count), time (ms, >= 0,
        finite), fraction (0..1), positive (> 0), number (finite: a saving may be negative);
        None when absent or null and not required."""
        if key not in d or d[key] is None:
            if required:
                self.fail(field, "is missing" if key not in d else "is null")
            return None
        v = d[key]
        expected = {
            "object": dict, "list": list, "str": str, "bool": bool,
        }.get(kind)  # fmt: skip
        if expected is not None:
            if not isinstance(v, expected):
                self.fail(field, f"is {_what(v)}, not {'an' if kind == 'object' else 'a'} {kind}")
            return v
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            self.fail(field, f"is {_what(v)}, not a number")
        if not math.isfinite(v):
            self.fail(field, "is not a finite number")
        if kind == "int" and (v < 0 or v != int(v)):
            self.fail(field, f"is {v!r}, not a count")
        if kind == "time" and v < 0:
            self.fail(field, f"is {v!r}, a negative time")
        if kind == "count" and v < 0:
            self.fail(field, f"is {v!r}, a negative count")
        if kind == "fraction" and not 0.0 <= v <= 1.0:
            self.fail(field, f"is {v!r}, a fraction outside 0..1")
        if kind == "positive" and v <= 0:
            self.fail(field, f"is {v!r}, not a positive number")
        return v


def validate(data: Any, path: str | Path = "report") -> dict:
    """`data` when it is a schema-1 report whose fields the comparison reads have the right
    types and ranges; BadInput naming the file and the first bad field otherwise."""
    p = Path(path)
    c = _Checker(p)
    if not isinstance(data, dict) or "schema" not in data:
        raise BadInput(f"{p} is not a membound report (no 'schema' key); {HINT}")
    schema = data["schema"]
    if schema != 1 or isinstance(schema, bool):
        shown = repr(schema)[:40] if isinstance(schema, (str, int, float)) else _what(schema)
        raise BadInput(f"{p} has report schema {shown}; this membound reads schema 1.")
    steps, findings = data.get("steps"), data.get("findings")
    if steps is None or findings is None:
        raise BadInput(f"{p} lacks 'steps' or 'findings'; {HINT}")
    c.get(data, "steps", "steps", "object")
    c.get(data, "findings", "findings", "list")
    for key in ("trace", "schema_note"):
        c.get(data, key, key, "str")
    device = c.get(data, "device", "device", "object")
    if device is not None:
        c.get(device, "name", "device.name", "str")
    count = c.get(steps, "count", "steps.count", "int")
    for key in ("median_step_ms", "mean_step_ms", "unprofiled_median_ms", "profiled_median_ms"):
        v = c.get(steps, key, f"steps.{key}", "time")
        if v is not None and v > MAX_STEP_MS:
            c.fail(f"steps.{key}", f"is {v!r} ms, longer than a day")
    c.get(steps, "marked", "steps.marked", "bool")
    rows = c.get(steps, "per_step", "steps.per_step", "list") or []
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            c.fail(f"steps.per_step[{i}]", f"is {_what(r)}, not an object")
        for key in ("wall_ms", "busy_ms", "kernel_busy_ms"):
            c.get(r, key, f"steps.per_step[{i}].{key}", "time")
        c.get(r, "kernels", f"steps.per_step[{i}].kernels", "int")
    for where, d in (("", data), ("steps.", steps)):
        for key in ("samples_per_step", "batch_size"):
            c.get(d, key, f"{where}{key}", "positive")
    for key in ("gpu_busy_fraction", "gpu_computing_fraction"):
        c.get(data, key, key, "fraction")
    shares = c.get(data, "step_shares", "step_shares", "object")
    for key, _ in (shares or {}).items():
        c.get(shares, key, f"step_shares.{key}", "fraction")
    for i, f in enumerate(findings):
        if not isinstance(f, dict) or "code" not in f or "time_lost_ms_per_step" not in f:
            raise BadInput(f"{p} has a finding without 'code' or 'time_lost_ms_per_step'; {HINT}")
        c.get(f, "code", f"findings[{i}].code", "str", required=True)
        c.get(f, "time_lost_ms_per_step", f"findings[{i}].time_lost_ms_per_step", "time")
        c.get(f, "evidence", f"findings[{i}].evidence", "object")
    ops = c.get(data, "ops", "ops", "list") or []
    for i, r in enumerate(ops):
        if not isinstance(r, dict):
            c.fail(f"ops[{i}]", f"is {_what(r)}, not an object")
        c.get(r, "name", f"ops[{i}].name", "str", required=True)
        for key in ("calls", "device_ms", "flops", "bytes"):
            c.get(r, key, f"ops[{i}].{key}", "time" if key == "device_ms" else "count")
        c.get(r, "dtypes", f"ops[{i}].dtypes", "list")
    remedies = c.get(data, "remedies", "remedies", "list") or []
    for i, r in enumerate(remedies):
        if not isinstance(r, dict):
            c.fail(f"remedies[{i}]", f"is {_what(r)}, not an object")
        c.get(r, "remedy", f"remedies[{i}].remedy", "str", required=True)
        c.get(r, "saving_ms_per_step", f"remedies[{i}].saving_ms_per_step", "number")
    idle = c.get(data, "idle_breakdown", "idle_breakdown", "object") or {}
    for key in idle:
        c.get(idle, key, f"idle_breakdown.{key}", "time")
    c.get(data, "gpu_whatif", "gpu_whatif", "object")
    if count == 0 or not steps.get("median_step_ms"):
        raise BadInput(
            f"{p} holds no steps (its trace had no usable events, or no step took any time): "
            "nothing to compare; analyze a trace with GPU or host activity."
        )
    return data


# ---------------------------------------------------------------------------- comparing
def _per_step_rows(report: dict) -> list[dict]:
    return report["steps"].get("per_step") or []


def _kernel_busy(report: dict) -> float | None:
    """Share of wall time spent in kernels, from the per-step rows (None if absent)."""
    if report.get("gpu_busy_fraction") is None:
        return None
    rows = _per_step_rows(report)
    share = computing_fraction(
        [r.get("wall_ms") or 0.0 for r in rows], [r.get("kernel_busy_ms") or 0.0 for r in rows]
    )
    return None if share is None else min(max(share, 0.0), 1.0)


def _shares(report: dict) -> dict[str, float | None]:
    """computing / copying / idle shares of the step; computing falls back to the kernel
    share of wall time for reports written before `step_shares` existed."""
    shares = report.get("step_shares") or {}
    computing = shares.get("computing")
    if computing is None:
        computing = report.get("gpu_computing_fraction")
    if computing is None:
        computing = _kernel_busy(report)
    return {"computing": computing, "copying": shares.get("copying"), "idle": shares.get("idle")}


def samples_per_step(report: dict) -> float | None:
    """The samples a step takes, where the report says (`samples_per_step`, `batch_size`;
    top level or in `steps`); None otherwise: never guessed."""
    for d in (report, report["steps"]):
        for key in ("samples_per_step", "batch_size"):
            if d.get(key):
                return float(d[key])
    return None


def _step_count(report: dict) -> int | None:
    count = report["steps"].get("count")
    return int(count) if count is not None else (len(_per_step_rows(report)) or None)


def _work(report: dict) -> dict[str, Any]:
    """What one step does: FLOPs, bytes and kernels per step, op device time by name."""
    n = _step_count(report) or 1
    ops = report.get("ops") or []
    rows = _per_step_rows(report)
    kernels = [r["kernels"] for r in rows if r.get("kernels") is not None]
    return {
        "flops_per_step": sum(r.get("flops") or 0.0 for r in ops) / n if ops else None,
        "bytes_per_step": sum(r.get("bytes") or 0.0 for r in ops) / n if ops else None,
        "kernels_per_step": sum(kernels) / len(kernels) if kernels and any(kernels) else None,
        "op_ms": {r["name"]: float(r.get("device_ms") or 0.0) for r in ops},
    }


def gpu_ms_by_family(report: dict) -> dict[str, float]:
    """GPU op time a step (ms) per op family (`fixes.op_family`: inductor's generated
    kernels, conv, matmul, attention, the norms, the optimizer, elementwise...), from the
    report's ops; {} without ops or a step count. Before and after a fix it says what the
    fix did to the GPU's work: compile's fusion shows as elementwise time gone and inductor
    time new, bf16 as the same families in less time."""
    from membound.analysis.fixes import op_family

    n = _step_count(report)
    out: dict[str, float] = {}
    if not n:
        return out
    for r in report.get("ops") or []:
        ms = r.get("device_ms")
        if isinstance(ms, (int, float)) and math.isfinite(ms):
            fam = op_family(str(r.get("name") or ""))
            out[fam] = out.get(fam, 0.0) + float(ms) / n
    return out


def _changed(b: float | None, a: float | None) -> float | None:
    """Relative change a/b - 1 when both are known and not both zero."""
    if b is None or a is None or (b == 0 and a == 0):
        return None
    return math.inf if b == 0 else a / b - 1


def workload(before: dict, after: dict) -> dict[str, Any]:
    """How the two runs' work per step differs: `differences` (one phrase each) and the
    figures behind them; `warning`: one line, or None when the work looks the same."""
    wb, wa = _work(before), _work(after)
    out: list[str] = []
    nb, na = _step_count(before), _step_count(after)
    if nb is not None and na is not None and nb != na:
        out.append(f"{nb} vs {na} steps captured")
    sb, sa = samples_per_step(before), samples_per_step(after)
    if sb is not None and sa is not None and sb != sa:
        out.append(f"{sb:g} vs {sa:g} samples per step")
    only: dict[str, list[str]] = {}
    for side, mine, other in (("before", wb, wa), ("after", wa, wb)):
        total = sum(mine["op_ms"].values())
        if not total or not other["op_ms"]:
            continue
        names = [n for n, t in mine["op_ms"].items() if n not in other["op_ms"]]
        big = sorted((n for n in names if mine["op_ms"][n] > OP_SET_SHARE * total),
                     key=lambda n: -mine["op_ms"][n])  # fmt: skip
        if big:
            only[side] = big
            out.append(f"ops only {side}: {', '.join(big[:3])}{', …' if len(big) > 3 else ''}")
    changes = {}
    for key, label in (
        ("flops_per_step", "FLOPs"),
        ("bytes_per_step", "bytes"),
        ("kernels_per_step", "kernels"),
    ):
        ch = _changed(wb[key], wa[key])
        # JSON has no Infinity: a change from none is null (the phrase says "from none")
        finite = ch if ch is not None and math.isfinite(ch) else None
        changes[key] = {"before": wb[key], "after": wa[key], "change": finite}
        if ch is not None and abs(ch) > WORK_CHANGE:
            sign = "+" if 0 < ch <= 1 else ""
            out.append(f"{label} per step {sign}{_pct_text(ch)}")
    warning = None
    if out:
        warning = (
            "the two runs may not do the same work per step: " + "; ".join(out) + " (expected "
            "if the fix changed precision, fused ops or the batch; otherwise compare per sample)"
        )
    return {
        "differences": out,
        "warning": warning,
        "steps": {"before": nb, "after": na},
        "samples_per_step": {"before": sb, "after": sa},
        "ops_only": only,
        **changes,
    }


def _pct_text(x: float) -> str:
    """+68275% reads better as 684x."""
    if math.isinf(x):
        return "from none"
    return f"{x + 1:.3g}x" if x > 1 else f"{x:.0%}"


def _same(before: dict, after: dict) -> str | None:
    """Why these are one report twice (the same file, or identical content), else None."""
    pb, pa = getattr(before, "path", None), getattr(after, "path", None)
    if pb is not None and pa is not None:
        try:
            if Path(pb).resolve() == Path(pa).resolve() or Path(pb).samefile(pa):
                return f"{pb} is given twice"
        except OSError:
            pass
    if before == after:
        names = f"{pb} and {pa}" if pb is not None and pa is not None else "the two reports"
        return f"{names} hold the same report"
    return None


def _rate(step_ms: float | None, per_step: float | None = 1.0) -> float | None:
    if not step_ms or per_step is None:
        return None
    return per_step * 1e3 / step_ms


def compare(before: dict, after: dict, fixes: list[str] | None = None) -> dict[str, Any]:
    """The comparison as plain data: step time (and its basis), throughput, step shares,
    GPU busy, findings per code, the GPU's idle by cause, resolved (present before, gone
    after) and new (absent before) codes, how the workloads differ, and the prediction check
    (`analysis.fix_check`: what the report before predicted for the fixes applied, `fixes`
    or those the pair shows, against the measured saving). BadInput for one report compared
    with itself."""
    same = _same(before, after)
    if same:
        raise BadInput(
            f"{same}: compare a report of the run before a fix with one of the run after it."
        )
    sb, sa = before["steps"], after["steps"]
    unprofiled = sb.get("unprofiled_median_ms") and sa.get("unprofiled_median_ms")
    key = "unprofiled_median_ms" if unprofiled else "median_step_ms"
    b_step, a_step = sb.get(key), sa.get(key)
    b_busy, a_busy = before.get("gpu_busy_fraction"), after.get("gpu_busy_fraction")
    lost_b, lost_a = fix_check.lost_by_code(before), fix_check.lost_by_code(after)
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
    shares_b, shares_a = _shares(before), _shares(after)
    nb, na = samples_per_step(before), samples_per_step(after)
    idle_b, idle_a = before.get("idle_breakdown") or {}, after.get("idle_breakdown") or {}
    causes = sorted(
        set(idle_b) | set(idle_a), key=lambda c: -max(idle_b.get(c) or 0.0, idle_a.get(c) or 0.0)
    )
    basis = "unprofiled" if unprofiled else "trace median"
    fam_b, fam_a = gpu_ms_by_family(before), gpu_ms_by_family(after)
    families = sorted(
        set(fam_b) | set(fam_a), key=lambda f: -max(fam_b.get(f, 0.0), fam_a.get(f, 0.0))
    )
    return {
        "before": before.get("trace"),
        "after": after.get("trace"),
        "step_ms": {
            "before": b_step,
            "after": a_step,
            "saved": saved,
            "basis": basis,
        },
        "speedup": b_step / a_step if saved is not None and a_step else None,
        "throughput": {
            "steps_per_s": {"before": _rate(b_step), "after": _rate(a_step)},
            "samples_per_s": {"before": _rate(b_step, nb), "after": _rate(a_step, na)},
        },
        "step_shares": {
            k: {"before": shares_b[k], "after": shares_a[k]}
            for k in ("computing", "copying", "idle")
        },
        "gpu_busy_fraction": {"before": b_busy, "after": a_busy},
        "kernel_busy_fraction": {"before": _kernel_busy(before), "after": _kernel_busy(after)},
        "findings": findings,
        # ms per step, the profiler's share set aside (`analysis.step_timing`)
        "idle_by_cause": {c: {"before": idle_b.get(c), "after": idle_a.get(c)} for c in causes},
        # GPU op time a step by op family (`gpu_ms_by_family`), the largest first
        "gpu_ms_by_family": {
            f: {"before": fam_b.get(f, 0.0), "after": fam_a.get(f, 0.0)} for f in families
        },
        "resolved": [c for c in codes if c in lost_b and c not in lost_a],
        "new": [c for c in codes if c in lost_a and c not in lost_b],
        "steps_marked": {"before": sb.get("marked"), "after": sa.get("marked")},
        "workload": workload(before, after),
        "prediction": fix_check.check(before, after, fixes, saved, basis),
    }
