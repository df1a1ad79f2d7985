"""The `--html` report: one self-contained file (inline SVG, inline CSS, no network)."""

from __future__ import annotations

import html
import io
import json
import re
from pathlib import Path

from membound.analysis.roofline import chart_points
from membound.report.ceilings import roof_legend, roof_mark
from membound.report.numbers import finite, ms, pct, value
from membound.report.terminal import (
    CHECK_HINT,
    REMEDIES_TITLE,
    REMEDY_COLUMNS,
    remedy_cells,
    roof_pct,
    shown_remedies,
    summary_line,
)

#: matplotlib colours of the timeline chart, per cause (busy first)
CAUSE_COLOURS = {
    "busy": "#2ca02c",
    "queued": "#98df8a",
    "dataloader": "#ffbf00",
    "pageable_copy": "#d62728",
    "copy": "#e377c2",
    "sync": "#1f77b4",
    "launch": "#17becf",
    "other": "#bbbbbb",
    "profiler": "#555555",
}
MAX_BARS = 200

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em;max-width:1100px;color:#222}
h1{font-size:1.4em} h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;font-size:.9em} td,th{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4} .num{text-align:right} .note{color:#666} pre{white-space:pre-wrap;margin:0;font-size:.85em}
.summary{font-size:1.1em;background:#f7f7f7;padding:.6em 1em;border-left:4px solid #2ca02c}
"""


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    text = buf.getvalue()
    text = text[text.find("<svg") :]  # drop the XML prolog and DOCTYPE (it names a URL)
    return re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)


def timeline_figure(a):
    """Stacked horizontal bar per step: busy, then idle by cause (ms)."""
    from matplotlib.figure import Figure

    steps = a.steps[:MAX_BARS]
    fig = Figure(figsize=(9, max(1.6, 0.22 * len(steps) + 1.4)))
    ax = fig.add_subplot()
    labels = [str(s.index) for s in steps]
    left = [0.0] * len(steps)
    for cause, colour in CAUSE_COLOURS.items():
        widths = [
            max(value(s.busy_ms if cause == "busy" else s.idle_by_cause.get(cause, 0.0)), 0.0)
            for s in steps
        ]
        if not any(widths):
            continue
        ax.barh(labels, widths, left=left, color=colour, label=cause, height=0.8)
        left = [x + w for x, w in zip(left, widths, strict=False)]
    ax.invert_yaxis()
    ax.set_xlabel("ms")
    ax.set_ylabel("step")
    ax.set_title("GPU busy / idle per step, idle coloured by cause", fontsize=10)
    if not any(left):  # nothing drawn (no finite time): no legend to place
        return fig
    ax.legend(
        loc="upper center",
        bbox_to_anchor=(0.5, -0.18 if len(steps) > 6 else -0.35),
        fontsize=8,
        ncol=7,
        frameon=False,
    )
    return fig


def roofline_figure(a):
    """The device roofline with each op as a point (area ∝ device time); None if unplaceable."""
    if a.ceilings is None:
        return None
    try:
        from membound.report.roofline_chart import draw
    except ImportError:  # matplotlib missing: the report goes on without the chart
        return None
    try:
        return draw(a.ceilings, chart_points(a.ops, limit=30))
    except Exception:  # a chart must never cost the user the report
        return None


def _code(f) -> str:
    """The finding's code, linked to its page where it has one."""
    code = f"<code>{html.escape(f.code)}</code>"
    return f"<a href='{html.escape(f.doc)}'>{code}</a>" if f.doc else code


def _pct(x) -> str | None:
    """A fraction as the terminal shows it (7.63e-05 -> 0%)."""
    return None if not finite(x) else roof_pct(x)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}" if finite(v) else "-"
    if isinstance(v, (dict, list)):
        return json.dumps(v, default=str)
    return str(v)


def render(a, sections: str = "") -> str:
    """The report page; `sections` is extra HTML placed after the summary (e.g. the per-rank
    table of a multi-rank run, built by `report.ranks`)."""
    e = html.escape
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>membound — {e(str(a.trace_path))}</title><style>{_CSS}</style></head><body>",
        f"<h1>membound analysis</h1><p class='note'>{e(str(a.trace_path))} · device: "
        f"{e(str(a.device_name or 'none'))} · ceilings: {e(str(a.ceilings_source or 'none'))}</p>",
        f"<p class='summary'>{e(summary_line(a))}</p>",
    ]
    parts += [f"<p class='note'>note: {e(n)}</p>" for n in a.notes]
    parts.append(sections)
    if a.has_gpu and a.idle_breakdown:
        parts.append("<h2>Where a step goes (ms per step)</h2><table><tr><th>GPU busy</th>")
        parts += [f"<th>idle: {e(c)}</th>" for c in a.idle_breakdown]
        busy = sum(s.busy_ms for s in a.steps) / max(len(a.steps), 1)
        parts.append(f"</tr><tr><td class='num'>{ms(busy)}</td>")
        parts += [f"<td class='num'>{ms(v)}</td>" for v in a.idle_breakdown.values()]
        parts.append("</tr></table>")
    parts.append("<h2>Findings</h2>")
    if a.findings:
        parts.append(
            "<table><tr><th>#</th><th>code</th><th>ms/step</th><th>share</th><th>finding</th><th>evidence</th><th>fix</th></tr>"
        )
        for i, f in enumerate(a.findings, 1):
            ev = "".join(f"{e(str(k))}: {e(_fmt(v))}\n" for k, v in f.evidence.items())
            parts.append(
                f"<tr><td>{i}</td><td>{_code(f)}</td><td class='num'>{ms(f.time_lost_ms_per_step)}</td>"
                f"<td class='num'>{pct(f.share_of_step)}</td><td>{e(f.title)}</td><td><pre>{ev}</pre></td><td>{e(f.fix)}</td></tr>"
            )
        parts.append("</table>")
    else:
        parts.append(
            "<p>No finding above 1% of a step.</p>"
            if a.has_gpu
            else "<p>No GPU: no finding applies.</p>"
        )
    rs = shown_remedies(a)
    if rs:  # as the terminal report: where one fix recovers two findings or more
        parts.append(f"<h2>Fixes</h2><p class='note'>{e(REMEDIES_TITLE)}</p><table><tr>")
        parts += [f"<th>{e(col)}</th>" for col, _ in REMEDY_COLUMNS]
        parts.append("</tr>")
        kinds = ["<td class='num'>" if just == "right" else "<td>" for _, just in REMEDY_COLUMNS]
        for r in rs:
            cells = zip(kinds, remedy_cells(a, r), strict=True)
            parts.append("<tr>" + "".join(f"{td}{e(text)}</td>" for td, text in cells) + "</tr>")
        parts.append(f"</table><p class='note'>{e(CHECK_HINT)}</p>")
    if a.has_gpu and a.steps:
        parts.append("<h2>Timeline</h2>" + _svg(timeline_figure(a)))
    elif a.steps:  # CPU-only: the host's step times are what there is
        parts.append(
            "<h2>Steps (host time)</h2><p class='note'>no GPU activity in this trace: GPU busy, "
            "idle causes, the roofline and the GPU findings do not apply</p><table><tr>"
            "<th>step</th><th>ms</th></tr>"
            + "".join(
                f"<tr><td>{s.index}</td><td class='num'>{ms(s.wall_ms)}</td></tr>" for s in a.steps
            )
            + "</table>"
        )
    fig = roofline_figure(a)
    if fig is not None:
        parts.append("<h2>Roofline</h2>" + _svg(fig))
    if a.ops:
        parts.append(
            "<h2>Top ops</h2>"
            + (
                f"<p class='note'>{pct(a.ops_costed_fraction)} of GPU op time costed "
                "(placed on the roofline)</p>"
                if finite(a.ops_costed_fraction)
                else ""
            )
            + "<table><tr><th>op</th><th>calls</th><th>device ms</th><th>FLOP/B</th>"
            "<th>bound</th><th>of roof</th><th>of bandwidth</th><th>of FLOP/s</th></tr>"
        )
        for r in a.ops[:25]:
            cells = [
                r.calls,
                r.device_ms,
                r.arithmetic_intensity,
                r.bound,
                _pct(r.fraction_of_attainable),
                _pct(r.achieved_bandwidth_fraction) + roof_mark(r.memory_roof)
                if finite(r.achieved_bandwidth_fraction)
                else None,
                _pct(r.achieved_flops_fraction),
            ]
            parts.append(
                f"<tr><td>{e(r.name)}</td>"
                + "".join(f"<td class='num'>{'-' if c is None else e(_fmt(c))}</td>" for c in cells)
                + "</tr>"
            )
        parts.append("</table>")
        legend = roof_legend(a.ops[:25])
        if legend:
            parts.append(f"<p class='note'>{e(legend)}</p>")
    parts.append("</body></html>\n")
    return "".join(parts)


def write(a, path, sections: str = "") -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(a, sections), encoding="utf-8")
    return path
