"""`membound compare` in the terminal: the metrics and findings before vs after a fix
(`analysis.compare.compare` computes them)."""

from __future__ import annotations


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
