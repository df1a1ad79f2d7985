"""The terminal report (rich): summary line, per-step busy/idle bar, findings, top ops."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from membound.report.options import ReportOptions

#: colour of each idle cause in the step bar (and in the HTML timeline)
CAUSE_STYLE = {
    "busy": ("green", "█"),
    "dataloader": ("yellow", "D"),
    "pageable_copy": ("red", "P"),
    "copy": ("magenta", "C"),
    "sync": ("blue", "S"),
    "launch": ("cyan", "L"),
    "other": ("grey50", "·"),
    "profiler": ("grey30", "~"),
}
BAR_WIDTH = 50


def summary_line(a) -> str:
    if not a.steps:
        return "no events in this trace"
    parts = [
        f"{len(a.steps)} step{'s' if len(a.steps) != 1 else ''}, median {a.median_step_ms:.2f} ms"
    ]
    if a.unprofiled_step_ms is not None:
        parts = [f"step {a.unprofiled_step_ms:.2f} ms unprofiled"]
        if a.profiled_step_ms is not None:
            parts[0] += (
                f", {a.profiled_step_ms:.2f} ms profiled ({a.profiler_overhead_fraction:+.0%})"
            )
    if a.gpu_busy_fraction is not None:
        parts.append(f"GPU busy {a.gpu_busy_fraction:.0%}")
    if a.findings:
        f = a.findings[0]
        parts.append(
            f"top: {f.code} — {f.time_lost_ms_per_step:.2f} ms/step ({f.share_of_step:.0%}) to gain"
        )
    elif a.has_gpu:
        parts.append("no finding above 1% of a step")
    return " · ".join(parts)


def _bar(step) -> Text:
    text = Text()
    if step.wall_ms <= 0:
        return text
    cells = [("busy", step.busy_ms)] + list(step.idle_by_cause.items())
    used = 0
    for i, (cause, ms) in enumerate(cells):
        n = round(ms / step.wall_ms * BAR_WIDTH) if i < len(cells) - 1 else BAR_WIDTH - used
        n = max(0, min(n, BAR_WIDTH - used))
        style, ch = CAUSE_STYLE.get(cause, ("white", "▒"))
        text.append(ch * n, style=style)
        used += n
    return text


def render(a, console: Console | None = None, options=None) -> None:
    """The single-trace report; `options`: a `report.ReportOptions` (its defaults when None)."""
    options = options or ReportOptions()
    console = console or Console()
    console.print(Text(f"membound: {a.trace_path}", style="bold"))
    console.print(summary_line(a))
    for note in a.notes:
        console.print(Text(f"note: {note}", style="dim"))
    if a.has_gpu and a.steps:
        legend = Text("  ")
        for cause, (style, ch) in CAUSE_STYLE.items():
            legend.append(f"{ch} {cause}  ", style=style)
        console.print(legend)
        shown = a.steps[: options.step_bars]
        for s in shown:
            line = Text(f"  step {s.index:>4} {s.wall_ms:8.2f} ms ")
            line.append_text(_bar(s))
            line.append(f" busy {s.busy_ms / s.wall_ms:.0%}" if s.wall_ms else "")
            console.print(line)
        if len(a.steps) > len(shown):
            console.print(Text(f"  … {len(a.steps) - len(shown)} more steps", style="dim"))
    elif a.steps:
        for s in a.steps[: options.step_bars]:
            console.print(f"  step {s.index:>4} {s.wall_ms:8.2f} ms (host)")
    if a.findings:
        t = Table(title="findings (ranked by time lost)", title_justify="left")
        t.add_column("code")
        t.add_column("ms/step", justify="right")
        t.add_column("share", justify="right")
        t.add_column("what")
        t.add_column("fix")
        for f in a.findings[: options.top_findings]:
            t.add_row(
                f.code, f"{f.time_lost_ms_per_step:.3f}", f"{f.share_of_step:.0%}", f.title, f.fix
            )
        console.print(t)
    if a.ops:
        t = Table(
            title=f"top ops (device time){'' if a.ceilings is not None else ' — no ceilings'}",
            title_justify="left",
        )
        for col, just in (
            ("op", "left"),
            ("calls", "right"),
            ("device ms", "right"),
            ("FLOP/B", "right"),
            ("bound", "left"),
            ("of roof", "right"),
            ("of BW", "right"),
            ("of FLOP/s", "right"),
        ):
            t.add_column(col, justify=just)
        for r in a.ops[: options.top_ops]:
            t.add_row(
                r.name,
                str(r.calls),
                f"{r.device_ms:.3f}",
                _num(r.arithmetic_intensity),
                r.bound or "-",
                _pct(r.fraction_of_attainable),
                _pct(r.achieved_bandwidth_fraction),
                _pct(r.achieved_flops_fraction),
            )
        console.print(t)


def _num(x) -> str:
    return "-" if x is None else f"{x:.3g}"


def _pct(x) -> str:
    return "-" if x is None else f"{x:.0%}"
