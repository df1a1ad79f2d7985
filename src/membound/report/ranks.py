"""The merged multi-rank report: a table per rank, the straggler line, the collectives with
their bus bandwidth against the GPU<->GPU ceiling (the all-reduce bus bandwidth measured at
the smallest message size at or above theirs, and that size); JSON adds a `ranks` section to schema 1.

Presentation only: the numbers come from `membound.analysis.ranks.RankedAnalysis`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text


def straggler_line(ra) -> str:
    if not ra.stragglers:
        if len(ra.ranks) < 2:
            return "one rank: no straggler comparison"
        return "no straggler: no rank is late by more than 5% of a step in most steps"
    parts = []
    for s in ra.stragglers:
        parts.append(
            f"straggler: rank {s.rank} holds the others back {s.held_back_ms_per_step:.2f} ms/step "
            f"({s.share_of_step:.0%} of a step; from {s.method})"
        )
    return " · ".join(parts)


def render(ra, console: Console | None = None) -> None:
    from membound.report import terminal

    console = console or Console()
    terminal.render(ra.merged, console)
    t = Table(
        title=f"ranks ({len(ra.ranks)} of {ra.world_size}"
        + (f", {ra.backend}" if ra.backend else "")
        + f", {ra.matched_steps} steps compared)",
        title_justify="left",
    )
    for col in (
        "rank",
        "steps",
        "step ms",
        "GPU busy",
        "compute ms",
        "waiting ms",
        "comm ms",
        "exposed comm ms",
        "last to arrive",
    ):
        t.add_column(col, justify="left" if col == "rank" else "right")
    late = {s.rank for s in ra.stragglers}
    for r in ra.ranks:
        t.add_row(
            Text(str(r.rank), style="bold red" if r.rank in late else ""),
            str(r.steps),
            f"{r.median_step_ms:.2f}",
            _pct(r.gpu_busy_fraction),
            f"{r.compute_ms_per_step:.2f}",
            f"{r.wait_ms_per_step:.2f}",
            f"{r.comm_ms_per_step:.2f}",
            f"{r.exposed_comm_ms_per_step:.2f}",
            _pct(r.late_fraction),
        )
    console.print(t)
    console.print(Text(straggler_line(ra), style="bold red" if ra.stragglers else "green"))
    if ra.collectives:
        c = Table(
            title="collectives (bus bandwidth from the last-arriving rank)", title_justify="left"
        )
        for col in (
            "collective",
            "calls/step",
            "MB/call",
            "ms",
            "bus GB/s",
            "ceiling GB/s",
            "ceiling at MiB",
            "of ceiling",
        ):
            c.add_column(col, justify="left" if col == "collective" else "right")
        for row in ra.collectives:
            c.add_row(
                row["collective"],
                f"{row['calls_per_step']:.1f}",
                _num(row["bytes_per_call"], 1e6),
                f"{row['transfer_ms']:.3f}",
                _num(row["bus_bandwidth_gbs"]),
                _num(row["ceiling_gbs"]),
                _num(row.get("ceiling_bytes"), 2**20),
                _pct(row["fraction_of_ceiling"]),
            )
        console.print(c)
        if ra.interconnect is None:
            console.print(
                Text(
                    "note: no GPU<->GPU ceiling measured for this device: run `membound roofline` "
                    "on a machine with 2+ GPUs",
                    style="dim",
                )
            )
    for note in ra.notes:
        console.print(Text(f"note: {note}", style="dim"))


def to_dict(ra) -> dict[str, Any]:
    """The schema-1 report of the merged analysis plus a `ranks` section."""
    from membound.report import json_report

    out = json_report.to_dict(ra.merged)
    out["ranks"] = json_report._clean(
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


def write_json(ra, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_dict(ra), indent=2) + "\n")
    return path


def emit(ra, *, console=None, json_path=None, html_path=None) -> None:
    """Terminal report (unless `console is False`), JSON with the `ranks` section, and the
    HTML report of the merged analysis."""
    if console is not False:
        render(ra, console)
    written = []
    if json_path:
        written.append(("json", write_json(ra, json_path)))
    if html_path:
        from membound.report import html

        written.append(("html", html.write(ra.merged, html_path, sections=ranks_html(ra))))
    if console is not False and written:
        out = console or Console()
        for what, path in written:
            out.print(f"wrote {what}: {path}")


def ranks_html(ra) -> str:
    """The per-rank table and the straggler verdict, for the HTML report."""
    import html

    e = html.escape
    cols = ("rank", "median step ms", "GPU busy", "compute ms/step", "waiting ms/step",
            "collectives ms/step", "exposed ms/step")  # fmt: skip
    parts = ["<h2>Ranks</h2><table><tr>", *(f"<th>{c}</th>" for c in cols), "</tr>"]
    for r in ra.ranks:
        cells = (r.rank, f"{r.median_step_ms:.3f}", _pct(r.gpu_busy_fraction),
                 f"{r.compute_ms_per_step:.3f}", f"{r.wait_ms_per_step:.3f}",
                 f"{r.comm_ms_per_step:.3f}", f"{r.exposed_comm_ms_per_step:.3f}")  # fmt: skip
        parts.append("<tr>" + "".join(f"<td class='num'>{e(str(c))}</td>" for c in cells) + "</tr>")
    parts.append("</table>")
    for s in ra.stragglers:
        parts.append(
            f"<p class='summary'>straggler: rank {s.rank} holds the others back "
            f"{s.held_back_ms_per_step:.2f} ms per step ({s.share_of_step:.0%})</p>"
        )
    return "".join(parts)


def _pct(x) -> str:
    return "-" if x is None else f"{x:.0%}"


def _num(x, scale: float = 1.0) -> str:
    return "-" if x is None else f"{x / scale:.3g}"
