"""The merged multi-rank report: a table per rank, the straggler line, the collectives with
their bus bandwidth against the GPU<->GPU ceiling (the all-reduce bus bandwidth measured at
the smallest message size at or above theirs, and that size); JSON adds a `ranks` section to schema 1.

Presentation only: the numbers come from `membound.analysis.ranks.RankedAnalysis`.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from membound.analysis.ranks import STRAGGLER_SHARE
from membound.report.numbers import finite, ms, pct


def straggler_line(ra) -> str:
    if not ra.stragglers:
        if len(ra.ranks) < 2:
            return "one rank: no straggler comparison"
        return (
            f"no straggler: no rank is late by more than {STRAGGLER_SHARE:.0%} of a step "
            "in most steps"
        )
    parts = []
    for s in ra.stragglers:
        parts.append(
            f"straggler: rank {s.rank} holds the others back {ms(s.held_back_ms_per_step, 2)} "
            f"ms/step ({pct(s.share_of_step)} of a step; from {s.method})"
        )
    return " · ".join(parts)


def render(ra, console: Console | None = None, options=None) -> None:
    """The merged report: the pooled analysis, then the ranks and their collectives."""
    from membound.report import terminal

    console = console or Console()
    terminal.render(ra.merged, console, options)
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
            ms(r.median_step_ms, 2),
            _pct(r.gpu_busy_fraction),
            ms(r.compute_ms_per_step, 2),
            ms(r.wait_ms_per_step, 2),
            ms(r.comm_ms_per_step, 2),
            ms(r.exposed_comm_ms_per_step, 2),
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
                ms(row["calls_per_step"], 1),
                _num(row["bytes_per_call"], 1e6),
                ms(row["transfer_ms"]),
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


def ranks_html(ra) -> str:
    """The per-rank table and the straggler verdict, for the HTML report."""
    import html

    e = html.escape
    cols = ("rank", "median step ms", "GPU busy", "compute ms/step", "waiting ms/step",
            "collectives ms/step", "exposed ms/step")  # fmt: skip
    parts = ["<h2>Ranks</h2><table><tr>", *(f"<th>{c}</th>" for c in cols), "</tr>"]
    for r in ra.ranks:
        cells = (r.rank, ms(r.median_step_ms), _pct(r.gpu_busy_fraction),
                 ms(r.compute_ms_per_step), ms(r.wait_ms_per_step),
                 ms(r.comm_ms_per_step), ms(r.exposed_comm_ms_per_step))  # fmt: skip
        parts.append("<tr>" + "".join(f"<td class='num'>{e(str(c))}</td>" for c in cells) + "</tr>")
    parts.append("</table>")
    for s in ra.stragglers:
        parts.append(
            f"<p class='summary'>straggler: rank {s.rank} holds the others back "
            f"{ms(s.held_back_ms_per_step, 2)} ms per step ({pct(s.share_of_step)})</p>"
        )
    return "".join(parts)


def _pct(x) -> str:
    return pct(x)


def _num(x, scale: float = 1.0) -> str:
    return "-" if not finite(x) else f"{x / scale:.3g}"
