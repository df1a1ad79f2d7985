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
from dataclasses import dataclass
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
    labels: list[_Label] = []  # placed once the axes are final, so that none overprints
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
        labels.append(_Label(f"ridge {ridge:.3g}", (ridge, peak), 7, color, 3.0, _RIDGE_SPOTS))

    if points:
        sizes = [float(_get(p, "size", default=1.0)) for p in points]
        biggest = max(sizes) or 1.0
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
            radius = math.sqrt(area / math.pi)  # scatter's `s` is the marker area in points²
            labels.append(
                _Label(str(_get(p, "label", "name", default="")), (x, y), 8, "black", radius)
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
    legend = ax.legend(loc="lower right", fontsize=8)
    unplaced = _place_labels(ax, labels, legend)
    if unplaced:
        ax.text(
            0.01,
            0.01,
            f"{unplaced} crowded point{'s' if unplaced > 1 else ''} unlabelled (see the op table)",
            transform=ax.transAxes,
            fontsize=7,
            color="dimgray",
        )

    if path is not None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format=path.suffix.lower().lstrip("."), dpi=120)
    return fig


@dataclass(frozen=True)
class _Label:
    text: str
    xy: tuple[float, float]  # data coordinates of what it labels
    fontsize: float
    color: str
    radius: float  # points: the marker's radius, kept clear
    spots: tuple[tuple[float, float, str, str], ...] = ()  # preferred spots first


#: where a label may sit around its point: (dx, dy) in points from the point's edge
#: direction, horizontal and vertical alignment; right of the point first, as charts read
_SPOTS = (
    (1, 0, "left", "center"),
    (1, 1, "left", "bottom"),
    (1, -1, "left", "top"),
    (0, 1, "center", "bottom"),
    (0, -1, "center", "top"),
    (-1, 0, "right", "center"),
    (-1, 1, "right", "bottom"),
    (-1, -1, "right", "top"),
)
#: ridge labels: above-left of the ridge point first (the roof runs right of it)
_RIDGE_SPOTS = (
    (-1, 1, "right", "bottom"),
    (1, -1, "left", "top"),
    (-1, -1, "right", "top"),
    (1, 1, "left", "bottom"),
)


def _place_labels(ax, labels: list[_Label], legend=None) -> int:
    """Put every label at the first of its spots (at growing distances) where its text box
    overlaps no other label, no other marker and the legend, inside the axes; a label that
    fits nowhere is left out. Ridge labels first, then points in the order given (the
    caller passes them slowest op first). Returns how many point labels were left out.

    Text extents come from a real render of the figure, so this holds for any font."""
    from matplotlib.transforms import Bbox

    fig = ax.figure
    if not hasattr(fig.canvas, "get_renderer"):  # a bare Figure: measure text as Agg draws it
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(fig)
    fig.draw_without_rendering()  # constrained layout settles the axes before measuring
    renderer = fig.canvas.get_renderer()
    to_px = fig.dpi / 72
    frame = ax.get_window_extent(renderer)
    taken: list[Bbox] = []
    if legend is not None:
        taken.append(legend.get_window_extent(renderer))
    centres = [ax.transData.transform(lab.xy) for lab in labels]
    markers = [
        Bbox.from_bounds(cx - r * to_px, cy - r * to_px, 2 * r * to_px, 2 * r * to_px)
        for (cx, cy), r in ((c, lab.radius) for c, lab in zip(centres, labels, strict=True))
    ]
    left_out = 0
    for i, lab in enumerate(labels):
        others = markers[:i] + markers[i + 1 :]
        placed = None
        for gap in (3, 9, 18):
            for dx, dy, ha, va in lab.spots or _SPOTS:
                offset = (dx * (lab.radius + gap), dy * (lab.radius + gap) if dy else 0.0)
                text = ax.annotate(
                    lab.text,
                    lab.xy,
                    textcoords="offset points",
                    xytext=offset,
                    ha=ha,
                    va=va,
                    fontsize=lab.fontsize,
                    color=lab.color,
                    annotation_clip=False,
                )
                text.set_in_layout(False)
                box = text.get_window_extent(renderer)
                fits = (
                    frame.contains(box.x0, box.y0)
                    and frame.contains(box.x1, box.y1)
                    and not any(box.overlaps(b) for b in taken)
                    and not any(box.overlaps(m) for m in others)
                )
                if fits:
                    placed = box
                    break
                text.remove()
            if placed is not None:
                break
        if placed is None:
            left_out += not lab.spots  # a ridge's value is in the legend's roofs too
            continue
        taken.append(placed)
    return left_out


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
