"""The roofline chart: log-log, one sloped memory roof, one flat roof per compute dtype.

Headless by construction: the figure is a bare `matplotlib.figure.Figure` (no pyplot, no
global backend switch), so drawing works on a server and never disturbs a notebook's
backend. Save it with `draw(..., path="x.png"|"x.svg")`, or keep the returned figure and
call `svg_string(fig)` / `fig.savefig(buffer, format="png")`; or pass `ax=` to draw into an
axes of your own figure.

Points are dicts or objects with `intensity` (FLOP/byte), `achieved_flops` (FLOP/s), a
`label` (or `name`) and an optional `size` (anything proportional to time: marker area ∝ it).
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

from membound.device.ceilings import COMPUTE_KEYS, Ceilings
from membound.errors import BadInput

SUFFIXES = (".png", ".svg")
#: roofs drawn, in legend order; vector fp32 is drawn dashed (no tensor cores)
_ROOF_ORDER = ("fp8", "int8", "fp16", "bf16", "tf32", "fp32", "fp32_vector", "fp64")


def _get(point: Any, *names: str, default: Any = None) -> Any:
    for n in names:
        if isinstance(point, dict):
            if n in point and point[n] is not None:
                return point[n]
        elif getattr(point, n, None) is not None:
            return getattr(point, n)
    return default


def _si(x: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= scale:
            return f"{x / scale:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def draw(
    ceilings: Ceilings,
    points: list[Any] | None = None,
    path: str | Path | None = None,
    *,
    title: str | None = None,
    ax: Any = None,
):
    """Draw the roofline of `ceilings` (and `points` on it); returns the matplotlib Figure.

    `path` ending in .png or .svg is written; anything else is a `BadInput`.
    """
    if path is not None and Path(path).suffix.lower() not in SUFFIXES:
        raise BadInput(
            f"cannot draw a chart to {str(path)!r}: the file name must end in .png or .svg"
        )
    from matplotlib.figure import Figure

    bw = ceilings.memory_bandwidth
    if not (bw and bw > 0 and math.isfinite(bw)):
        raise BadInput(
            f"the ceilings of {ceilings.name} have no memory bandwidth to draw a roofline from"
        )
    roofs = [(k, ceilings.flops[k]) for k in _ROOF_ORDER if k in ceilings.flops]
    roofs += [
        (k, v) for k, v in ceilings.flops.items() if k not in _ROOF_ORDER and k in COMPUTE_KEYS
    ]
    points = [p for p in (points or []) if _valid(p)]

    if ax is None:
        fig = Figure(figsize=(9, 6), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure

    ridges = [peak / bw for _, peak in roofs] or [1.0]
    xs = [_get(p, "intensity") for p in points]
    x_lo = min([min(ridges) / 100, *(x / 3 for x in xs)])
    x_hi = max([max(ridges) * 20, *(x * 3 for x in xs)])
    top = max([peak for _, peak in roofs] or [bw * x_hi])

    # memory roof: sloped, up to the highest ridge (beyond it every compute roof is lower)
    x_mem_end = max(ridges) if roofs else x_hi
    ax.plot(
        [x_lo, x_mem_end],
        [bw * x_lo, bw * x_mem_end],
        color="black",
        lw=2,
        label=f"memory {_si(bw, 'B/s')}",
    )
    cmap = _colors(len(roofs))
    labelled: list[float] = []
    for (key, peak), color in zip(roofs, cmap, strict=True):
        ridge = peak / bw
        style = "--" if key in ("fp32_vector", "fp64") else "-"
        ax.plot(
            [ridge, x_hi],
            [peak, peak],
            style,
            color=color,
            lw=1.8,
            label=f"{key} {_si(peak, 'FLOP/s')}",
        )
        ax.plot([ridge], [peak], "o", color=color, ms=5)
        # near-equal roofs (fp16 vs bf16) would print their ridge labels on top of each other
        crowded = any(abs(math.log(ridge / r)) < 0.15 for r in labelled)
        labelled.append(ridge)
        ax.annotate(
            f"ridge {ridge:.3g}",
            (ridge, peak),
            textcoords="offset points",
            xytext=(4, -11) if crowded else (-4, 5),
            ha="left" if crowded else "right",
            fontsize=7,
            color=color,
        )

    if points:
        sizes = [float(_get(p, "size", default=1.0)) for p in points]
        biggest = max(sizes) or 1.0
        placed: list[tuple[float, float]] = []  # (log10 x, log10 y) of points labelled so far
        for p, s in zip(points, sizes, strict=True):
            x, y = _get(p, "intensity"), _get(p, "achieved_flops")
            area = 20 + 400 * (s / biggest)  # area ∝ time, with a floor so small ops stay visible
            ax.scatter(
                [x],
                [y],
                s=area,
                alpha=0.6,
                color="tab:red",
                edgecolors="black",
                linewidths=0.5,
                zorder=3,
            )
            # labels run to the right of their point: one whose point sits at about the same
            # height as an earlier one and less than ~0.8 decade beside it (two variants
            # moving similar bytes at similar speed) is stacked below instead of overprinted
            lx, ly = math.log10(x), math.log10(y)
            near = sum(abs(lx - px) < 0.8 and abs(ly - py) < 0.08 for px, py in placed)
            placed.append((lx, ly))
            ax.annotate(
                str(_get(p, "label", "name", default="")),
                (x, y),
                textcoords="offset points",
                xytext=(6, -3 - 11 * near),
                fontsize=8,
            )

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    y_lo = min([bw * x_lo, *(_get(p, "achieved_flops") / 3 for p in points)])
    ax.set_ylim(y_lo, top * 2)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("performance (FLOP/s)")
    source = "measured" if ceilings.source == "measured" else ceilings.source
    ax.set_title(
        title or f"roofline: {ceilings.name} ({source}); ridge points labelled in FLOP/byte",
        fontsize=10,
    )
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)

    if path is not None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format=path.suffix.lower().lstrip("."), dpi=120)
    return fig


def svg_string(fig) -> str:
    """The figure as an SVG document string (for embedding in HTML)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    return buf.getvalue()


def _valid(p: Any) -> bool:
    x, y = _get(p, "intensity"), _get(p, "achieved_flops")
    return (
        x is not None
        and y is not None
        and x > 0
        and y > 0
        and math.isfinite(x)
        and math.isfinite(y)
    )


def _colors(n: int) -> list[str]:
    palette = [
        "tab:purple",
        "tab:blue",
        "tab:cyan",
        "tab:green",
        "tab:olive",
        "tab:orange",
        "tab:brown",
        "tab:gray",
    ]
    return [palette[i % len(palette)] for i in range(n)]
