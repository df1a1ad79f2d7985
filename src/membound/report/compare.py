"""`membound compare` in the terminal: step time, throughput and the share of the step the GPU
computes first, then copying, idle, GPU busy and the findings, before vs after a fix
(`analysis.compare.compare` computes them). A figure a report lacks prints as "-", never as
"nan%"."""

from __future__ import annotations

from membound.report.numbers import DASH, finite, ms, pct

#: idle causes (`analysis.result.IDLE_CAUSES`) as the comparison's rows name them
CAUSE_LABEL = {
    "queued": "GPU turnaround",
    "dataloader": "DataLoader",
    "pageable_copy": "pageable copies",
    "copy": "copies",
    "sync": "syncs",
    "launch": "launching",
    "other": "host outside ops",
    "profiler": "profiler",
}
#: an idle cause below this on both sides, or changed by less (ms/step), gets no row
IDLE_SHOWN_MS = 0.05


def prediction_line(p: dict) -> str | None:
    """One line: what the report before predicted for the fixes applied, against the saving
    measured; None where no fix is known and the report offered none."""
    fixes, measured = p.get("fixes") or [], p.get("measured_ms")
    what = "unprofiled" if p.get("basis") == "unprofiled" else "trace-median (profiled)"
    if not fixes:
        top = p.get("top_remedy")
        if not top or not finite(top.get("saving_ms_per_step")):
            return None
        return (
            f"prediction: the report before ranked {top['remedy']} first "
            f"({top['saving_ms_per_step']:.2f} ms/step); which fix was applied is not clear "
            "from the two reports: name it with --fix KEY to check the prediction"
        )
    names = " + ".join(fixes)
    how = (
        f" (inferred: {'; '.join(p.get('shown_by') or [])}; --fix KEY names it)"
        if p.get("how") == "inferred"
        else ""
    )
    pred = p.get("predicted_ms")
    change_pred = f"save {pred:.2f}" if not pred < 0 else f"lose {-pred:.2f}"
    head = f"prediction: {names} was to {change_pred} ms/step{how}"
    if not p.get("offered"):
        head = f"prediction: the report before offered no {names} (a saving of 0){how}"
    if not finite(measured):
        return head + "; the measured saving is unknown"
    error = p["error_ms"]
    verdict = (
        "within the tolerance"
        if p.get("within_tolerance")
        else f"{'over' if error > 0 else 'under'}-predicted by {abs(error):.2f} ms, outside "
        "the tolerance"
    )
    change = f"saved {measured:.2f} ms" if measured >= 0 else f"lost {-measured:.2f} ms"
    return (
        f"{head}; the {what} step {change}: {verdict} "
        f"(±{p['tolerance_ms']:.2f} ms: 25% of the saving, at least 2 ms)"
    )


def _rate(v) -> str:
    return f"{v:,.1f}" if finite(v) else DASH


def _points(b, a) -> str:
    return f"{(a - b) * 100:+.0f} points" if finite(b) and finite(a) else DASH


def _ratio(b, a) -> str:
    return f"{a / b:.2f}x" if finite(b) and finite(a) and b > 0 else DASH


def _saving(saved, speedup) -> str:
    """ "1.234 ms faster (1.50x)" / "0.5 ms slower (0.90x)"."""
    if not finite(saved):
        return DASH
    x = f" ({speedup:.2f}x)" if finite(speedup) else ""
    return f"{saved:.3f} ms faster{x}" if saved >= 0 else f"{-saved:.3f} ms slower{x}"


def render(cmp: dict, console=None, *, before_label="before", after_label="after") -> None:
    """Print the comparison: the metrics table (step time, throughput and computing share
    first), the workload warning (one line, when the runs' work per step differs), the
    findings resolved and new."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    out = console or Console()
    step = cmp["step_ms"]
    t = Table(title=f"{before_label} → {after_label}", title_justify="left")
    for col in ("", before_label, after_label, "change"):
        t.add_column(col, justify="right" if col else "left")
    basis = step.get("basis") or "trace median"
    t.add_row(
        f"step time (ms, {basis})",
        ms(step["before"]),
        ms(step["after"]),
        _saving(step.get("saved"), cmp.get("speedup")),
    )
    rates = cmp.get("throughput") or {}
    for key, label in (("steps_per_s", "throughput (steps/s)"),
                       ("samples_per_s", "throughput (samples/s)")):  # fmt: skip
        r = rates.get(key) or {}
        if key == "samples_per_s" and not (finite(r.get("before")) or finite(r.get("after"))):
            continue  # no report says its samples per step: nothing per sample is invented
        t.add_row(label, _rate(r.get("before")), _rate(r.get("after")),
                  _ratio(r.get("before"), r.get("after")))  # fmt: skip
    shares = cmp.get("step_shares") or {}
    for key, label in (("computing", "GPU computing (share of step)"),
                       ("copying", "GPU copying only"), ("idle", "GPU idle")):  # fmt: skip
        v = shares.get(key) or {}
        if key != "computing" and not (finite(v.get("before")) or finite(v.get("after"))):
            continue
        t.add_row(label, pct(v.get("before")), pct(v.get("after")),
                  _points(v.get("before"), v.get("after")))  # fmt: skip
    busy = cmp["gpu_busy_fraction"]
    t.add_row(
        "GPU busy (computing or copying)",
        pct(busy["before"]),
        pct(busy["after"]),
        _points(busy["before"], busy["after"]),
    )
    for f in cmp["findings"]:
        saved_ms = f.get("saved_ms")
        state = (
            "resolved"
            if f["code"] in cmp["resolved"]
            else "new"
            if f["code"] in cmp["new"]
            else DASH
            if not finite(saved_ms)
            else f"{saved_ms:.3f} ms saved"
            if saved_ms >= 0
            else f"{-saved_ms:.3f} ms worse"
        )
        t.add_row(f"lost to {f['code']} (ms/step)", ms(f["before_ms"]), ms(f["after_ms"]), state)
    for cause, v in (cmp.get("idle_by_cause") or {}).items():
        b, a = v.get("before"), v.get("after")
        if max(b or 0.0, a or 0.0) < IDLE_SHOWN_MS or (
            finite(b) and finite(a) and abs(a - b) < IDLE_SHOWN_MS
        ):
            continue
        change = f"{a - b:+.3f} ms" if finite(b) and finite(a) else DASH
        t.add_row(f"idle: {CAUSE_LABEL.get(cause, cause)} (ms/step)", ms(b), ms(a), change)
    for fam, v in (cmp.get("gpu_ms_by_family") or {}).items():
        b, a = v.get("before"), v.get("after")
        if max(b or 0.0, a or 0.0) < IDLE_SHOWN_MS:
            continue
        change = f"{a - b:+.3f} ms" if finite(b) and finite(a) else DASH
        t.add_row(f"GPU time: {fam} ops (ms/step)", ms(b), ms(a), change)
    out.print(t)
    warning = (cmp.get("workload") or {}).get("warning")
    if warning:
        out.print(Text(f"warning: {warning}", style="yellow"), soft_wrap=True)
    if False in cmp["steps_marked"].values():
        out.print(
            "note: a trace without step markers counts its whole window as one step, so "
            "'step time' there is the window's time."
        )
    out.print(
        f"findings resolved: {', '.join(cmp['resolved']) or 'none'}; "
        f"new: {', '.join(cmp['new']) or 'none'}"
    )
    line = prediction_line(cmp.get("prediction") or {})
    if line:
        out.print(Text(line), soft_wrap=True)
