"""The terminal report (rich): summary line, per-step busy/idle bar, findings, top ops."""

from __future__ import annotations

import textwrap

from rich.console import Console
from rich.table import Table
from rich.text import Text

from membound.analysis.op_rows import ABOVE_ROOF
from membound.report.ceilings import roof_legend, roof_mark
from membound.report.numbers import finite, ms, pct, value
from membound.report.options import ReportOptions

#: colour of each idle cause in the step bar (and in the HTML timeline)
CAUSE_STYLE = {
    "busy": ("green", "█"),
    "queued": ("green", "░"),  # the GPU's own turnaround between queued work
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
    """The headline: the step (unprofiled when timed), where it goes, and the fix that saves
    the most (the top finding's where no fix is ranked), e.g. `4 steps · step 8.51 ms ·
    computing 30% · copying 40% · idle 30% · top fix: pin_memory 5.14 ms/step (60%) to
    gain`. The fix, not the finding: on the DDPM U-Net (H100, 2026-12-07) the top finding,
    `tf32-matmul`, said 7.92 ms/step, and compile, which recovers four findings, saved 9.85
    where bf16 saved 2.2-12.5 on four hosts."""
    if not a.steps:
        return "no events in this trace"
    parts = [f"{len(a.steps)} step{'s' if len(a.steps) != 1 else ''}"]
    if a.unprofiled_step_ms is not None:
        step = f"step {ms(a.unprofiled_step_ms, 2)} ms unprofiled"
        if a.profiled_step_ms is not None:
            step += (
                f" ({ms(a.profiled_step_ms, 2)} profiled, "
                f"{pct(a.profiler_overhead_fraction, signed=True)})"
            )
        parts.append(step)
    else:
        parts.append(f"step {ms(a.median_step_ms, 2)} ms" + ("" if a.has_gpu else " (host)"))
    shares = a.step_shares
    if shares is not None:
        parts += [f"{k} {pct(v)}" for k, v in shares.items()]
    fixes = [r for r in a.remedies if r.saving_ms_per_step > 0] if a.findings else []
    if fixes:  # the fix that saves the most: what a reader applies first
        r = fixes[0]
        parts.append(
            f"top fix: {r.key} {ms(r.saving_ms_per_step, 2)} ms/step ({pct(r.share_of_step)}) "
            "to gain"
        )
    elif a.findings:
        f = a.findings[0]
        parts.append(
            f"top: {f.code} {ms(f.time_lost_ms_per_step, 2)} ms/step ({pct(f.share_of_step)}) "
            "to gain"
        )
    elif a.has_gpu:
        parts.append("no finding above 1% of a step")
    return " · ".join(parts)


def _bar(step, width: int = BAR_WIDTH) -> Text:
    """Busy, then idle by cause, in `width` cells (empty when the step has no wall time;
    a figure that is not finite takes no cell)."""
    text = Text()
    wall = value(step.wall_ms)
    if wall <= 0:
        return text
    cells = [("busy", step.busy_ms)] + list(step.idle_by_cause.items())
    used = 0
    for i, (cause, t) in enumerate(cells):
        t = max(value(t), 0.0)
        n = round(t / wall * width) if i < len(cells) - 1 else width - used
        n = max(0, min(n, width - used))
        style, ch = CAUSE_STYLE.get(cause, ("white", "▒"))
        text.append(ch * n, style=style)
        used += n
    return text


#: below this width (or when the output is no terminal) findings print as a list
TABLE_MIN_WIDTH = 100


def tables(console: Console, options) -> bool:
    """Tables on a wide terminal with the rich format; a list otherwise (a pipe, a CI log, a
    narrow window): no line wider than the console, no identifier cut."""
    return options.format == "rich" and console.is_terminal and console.width >= TABLE_MIN_WIDTH


def render(a, console: Console | None = None, options=None) -> None:
    """The single-trace report; `options`: a `report.ReportOptions` (its defaults when None)."""
    options = options or ReportOptions()
    console = console or Console()
    if not tables(console, options):
        return render_list(a, console, options)
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
        width = max(10, min(BAR_WIDTH, console.width - 36))
        for s in shown:
            line = Text(f"{_who(s)}step {s.index:>4} {ms(s.wall_ms, 2):>8} ms ")
            line.append_text(_bar(s, width))
            line.append(f" busy {_busy(s)}" if _busy(s) else "")
            console.print(line)
        if len(a.steps) > len(shown):
            console.print(Text(f"  … {len(a.steps) - len(shown)} more steps", style="dim"))
    elif a.steps:
        for s in a.steps[: options.step_bars]:
            console.print(f"  step {s.index:>4} {ms(s.wall_ms, 2):>8} ms (host)")
    if a.findings:
        t = Table(title="findings (ranked by the time their fix saves)", title_justify="left")
        t.add_column("code")
        t.add_column("ms/step", justify="right")
        t.add_column("share", justify="right")
        t.add_column("what")
        t.add_column("fix")
        for f in a.findings[: options.top_findings]:
            t.add_row(f.code, ms(f.time_lost_ms_per_step), pct(f.share_of_step), f.title, f.fix)
        console.print(t)
    rs = shown_remedies(a, options)
    if rs:
        t = Table(title=REMEDIES_TITLE, title_justify="left")
        for col, just in REMEDY_COLUMNS:
            t.add_column(col, justify=just)
        for r in rs:
            t.add_row(*remedy_cells(a, r))
        console.print(t)
        console.print(Text(CHECK_HINT, style="dim"))
    if a.ops:
        t = Table(
            title=f"top ops (device time{_costed(a)})"
            + ("" if a.ceilings is not None else " — no ceilings"),
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
                _count(r.calls),
                ms(r.device_ms),
                _num(r.arithmetic_intensity),
                r.bound or "-",
                _pct(r.fraction_of_attainable),
                _pct(r.achieved_bandwidth_fraction) + roof_mark(r.memory_roof),
                _pct(r.achieved_flops_fraction),
            )
        t.caption = roof_legend(a.ops[: options.top_ops])
        console.print(t)


REMEDIES_TITLE = "fixes ranked by what they save (the findings each one recovers, once)"
#: said under the fixes: how a user checks a prediction on their own run
CHECK_HINT = (
    "applied one? record the run again with --json and `membound compare BEFORE.json "
    "AFTER.json` checks what it saved against this prediction"
)


#: the fixes table's columns and their alignment (the terminal's and the HTML report's)
REMEDY_COLUMNS = (
    ("fix", "left"), ("ms/step", "right"), ("share", "right"), ("step after", "right"),
    ("recovers", "left"), ("how", "left"),
)  # fmt: skip


def remedy_cells(a, r) -> tuple[str, ...]:
    """Fix `r`'s row of the fixes table (`REMEDY_COLUMNS`), as text."""
    after = r.expected_step_ms_after_fix
    return (
        r.key, ms(r.saving_ms_per_step), pct(r.share_of_step),
        ms(after, 2) if finite(after) else "-", recovers(a, r), r.what,
    )  # fmt: skip


def shown_remedies(a, options=None) -> list:
    """The remedies worth a section: only when one fix recovers two findings or more (else
    the findings list already says it all), at most as many as findings are shown
    (`options.top_findings`; all, without options)."""
    rs = list(getattr(a, "remedies", None) or [])
    if not any(len(r.findings) > 1 for r in rs):
        return []
    return rs if options is None else rs[: options.top_findings]


def recovers(a, r) -> str:
    """ "memory-bound-op x2 (1, 4), fp32-storage (3)": the codes and finding numbers; for a
    fix predicted to lose time (compile's replay, `analysis.compile_whatif`), said after."""
    parts = []
    for code in r.codes:
        idx = [i + 1 for i in r.findings if a.findings[i].code == code]
        parts.append(
            f"{code}{f' x{len(idx)}' if len(idx) > 1 else ''} ({', '.join(map(str, idx))})"
        )
    said = ", ".join(parts) or (
        "no finding: the optimizer's own replay"
        if r.key == "fused_optimizer"
        else "no finding: its convolutions, matmuls and norms timed after the script"
    )
    return f"{said} (predicted to lose time here)" if r.saving_ms_per_step < 0 else said


def _costed(a) -> str:
    """ "; 97% of GPU op time costed": how much of the GPU's op time the roofline places."""
    share = getattr(a, "ops_costed_fraction", None)
    return "" if not finite(share) else f"; {pct(share)} of GPU op time costed"


def _who(step) -> str:
    return "  " if step.rank is None else f"  r{step.rank} "


def _num(x) -> str:
    return "-" if not finite(x) else f"{x:.3g}"


def _pct(x) -> str:
    return roof_pct(x)


def _count(x) -> str:
    return str(x) if finite(x) else "-"


def _busy(step) -> str:
    """The step's busy share ("" without a wall time to divide by)."""
    wall = value(step.wall_ms)
    return pct(value(step.busy_ms) / wall) if wall > 0 else ""


def roof_pct(x: float | None) -> str:
    """A fraction of a ceiling as a percentage; above the roof it reads ">100%" (a note
    in the report says why an op can run there), never "112%"; "-" when there is none."""
    if not finite(x):
        return "-"
    return ">100%" if x > ABOVE_ROOF else pct(x)


def render_list(a, console: Console, options) -> None:
    """The report as lines for pipes, logs and narrow terminals: per finding its code, saving,
    share and the step after the fix, then what and how to fix it, each on lines of its own."""
    _lines(console, f"membound: {a.trace_path}", "", style="bold")
    _lines(console, summary_line(a), "")
    for note in a.notes:
        _lines(console, f"note: {note}", "", style="dim")
    width = max(10, min(BAR_WIDTH, console.width - 36))
    for s in a.steps[: options.step_bars]:
        line = Text(f"{_who(s)}step {s.index:>4} {ms(s.wall_ms, 2):>8} ms ")
        if a.has_gpu:
            line.append_text(_bar(s, width))
            line.append(f" {_busy(s)}" if _busy(s) else "")
        else:
            line.append("(host)")
        console.print(line, no_wrap=True, overflow="ellipsis")
    if len(a.steps) > options.step_bars:
        console.print(Text(f"  … {len(a.steps) - options.step_bars} more steps", style="dim"))
    if a.findings:
        console.print(Text("findings (ranked by the time their fix saves)", style="bold"))
    for i, f in enumerate(a.findings[: options.top_findings], 1):
        after = f.expected_step_ms_after_fix
        head = f"{i}. {f.code}  {ms(f.time_lost_ms_per_step)} ms/step  {pct(f.share_of_step)}"
        console.print(
            Text(head + (f"  → {ms(after, 2)} ms/step" if finite(after) else ""), style="bold")
        )
        _lines(console, f.title, "   ")
        _lines(console, f"fix: {f.fix}", "   ")
        if f.doc:
            _lines(console, f"more: {f.doc}", "   ", style="dim")
    rs = shown_remedies(a, options)
    if rs:
        console.print(Text(REMEDIES_TITLE, style="bold"))
    for i, r in enumerate(rs, 1):
        after = r.expected_step_ms_after_fix
        head = f"{i}. {r.key}  {ms(r.saving_ms_per_step)} ms/step  {pct(r.share_of_step)}"
        console.print(
            Text(head + (f"  → {ms(after, 2)} ms/step" if finite(after) else ""), style="bold")
        )
        _lines(console, f"{r.what}; recovers {recovers(a, r)}", "   ")
    if rs:
        _lines(console, CHECK_HINT, "", style="dim")
    if a.ops:
        extra = "" if a.ceilings is not None else " — no ceilings"
        console.print(Text(f"top ops (device time{_costed(a)}{extra})", style="bold"))
        for r in a.ops[: options.top_ops]:
            placed = (
                ""
                if r.bound is None
                else f" · {r.bound}-bound, {_pct(r.fraction_of_attainable)} of roof"
                + (f" ({roof_mark(r.memory_roof).strip()})" if roof_mark(r.memory_roof) else "")
            )
            console.print(f"  {r.name}")
            console.print(f"    {_count(r.calls)} calls · {ms(r.device_ms)} ms{placed}")


def _lines(console: Console, text: str, indent: str, style: str | None = None) -> None:
    """`text` wrapped at the console's width on word boundaries, never inside a word (an op
    name, a path, an API name stays whole even if it is wider than the line)."""
    width = max(console.width, 20)
    wrapped = textwrap.wrap(
        text, width=width, initial_indent=indent, subsequent_indent=indent + "  ",
        break_long_words=False, break_on_hyphens=False,
    ) or [indent]  # fmt: skip
    for line in wrapped:
        console.print(Text(line, style=style or ""), no_wrap=True, overflow="ignore", crop=False)
