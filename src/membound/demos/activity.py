"""The demo's timeline picture: what the GPU and the host did over the captured window.

One lane per kind of activity — GPU kernels (computing), host→device copies from pageable and
from pinned memory, and the host blocked inside a memcpy call — on one time axis, so the
difference between the variants is visible at a glance: pageable copies block the host and
leave the GPU without work; pinned copies on the compute stream alternate with the kernels;
a prefetcher's copies run under the kernels.
"""

from __future__ import annotations

from pathlib import Path

#: lane label -> colour (the kernel colour is the report's "busy" green)
LANES = {
    "GPU kernels": "#2ca02c",
    "H2D pageable": "#d62728",
    "H2D pinned": "#9467bd",
    "host in memcpy call": "#e377c2",
}


def lanes(trace) -> dict[str, list[tuple[float, float]]]:
    """Lane -> [(start µs, duration µs)] relative to the first GPU or host event."""
    from membound.trace.model import H2D, KERNEL, MEMCPY_CALL, PAGEABLE

    gpu, rt = trace.gpu, trace.runtime
    h2d = gpu.direction == H2D
    pageable = h2d & (gpu.host_memory == PAGEABLE)
    sel = {
        "GPU kernels": (gpu, gpu.kind == KERNEL),
        "H2D pageable": (gpu, pageable),
        "H2D pinned": (gpu, h2d & ~pageable),
        "host in memcpy call": (rt, rt.call == MEMCPY_CALL),
    }
    starts = [t.ts[m].min() for t, m in sel.values() if m.any()]
    t0 = min(starts) if starts else 0.0
    return {
        lane: list(zip((t.ts[m] - t0).tolist(), t.dur[m].tolist(), strict=True))
        for lane, (t, m) in sel.items()
    }


def draw(trace_path: str | Path, path: str | Path, title: str) -> Path:
    """Write the activity timeline of a trace file to `path` (.png or .svg)."""
    from matplotlib.figure import Figure

    from membound.trace.load import load_trace

    spans = lanes(load_trace(str(trace_path)))
    fig = Figure(figsize=(10, 2.6), layout="constrained")
    ax = fig.add_subplot()
    names = list(LANES)
    for i, lane in enumerate(names):
        bars = [(s / 1e3, max(d, 0.5) / 1e3) for s, d in spans[lane]]  # ms; keep µs copies visible
        if bars:
            ax.broken_barh(bars, (len(names) - 1 - i - 0.4, 0.8), color=LANES[lane])
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(list(reversed(names)), fontsize=8)
    ax.set_xlabel("ms from the start of the captured window")
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path
