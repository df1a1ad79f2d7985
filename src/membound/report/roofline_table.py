"""The per-op roofline table of `membound.roofline.measure` in the terminal (rich)."""

from __future__ import annotations

import math


def table(t):
    """A rich Table of `t` (a `membound.roofline.RooflineTable`), slowest op first."""
    from rich.table import Table

    from membound.report.ceilings import roof_legend, roof_mark
    from membound.report.terminal import roof_pct

    out = Table(title=f"roofline on {t.ceilings.name} ({t.device}), per call", title_justify="left")
    for col in ("op", "calls", "device ms", "GFLOP", "MB", "FLOP/B", "bound", "of roof", "of BW",
                "of FLOP/s"):  # fmt: skip
        out.add_column(col, justify="left" if col in ("op", "bound") else "right")
    for r in t.rows:
        placed = r.bound is not None
        x = r.arithmetic_intensity
        out.add_row(
            r.name,
            f"{r.calls:g}",
            f"{r.device_ms:.3f}",
            f"{r.flops / 1e9:.3g}" if r.exact_cost else "-",
            f"{r.bytes / 1e6:.4g}" if r.exact_cost else "-",
            "-" if not placed or x is None else ("inf" if math.isinf(x) else f"{x:.3g}"),
            "?" if not placed else f"{r.bound} ({r.compute})" if r.bound == "compute" else r.bound,
            "-" if not placed else f"{r.fraction_of_attainable:.0%}",
            "-"
            if not placed
            else roof_pct(r.achieved_bandwidth_fraction) + roof_mark(r.memory_roof),
            "-" if not placed else roof_pct(r.achieved_flops_fraction),
        )
    out.caption = roof_legend(t.rows)
    return out
