"""The demo without a GPU: real H200 traces shipped with the package, analysed here.

The traces were recorded on one H200 (torch 2.11, 2026-11-29); the analysis runs on this
machine against the ceilings measured on that H200, exactly as `membound analyze` would.
"""

from __future__ import annotations

from pathlib import Path

from membound.demos import RECORDED_PIPELINE, RECORDED_SCENARIOS, recorded_ceilings, recorded_trace


def input_pipeline(out: Path, console) -> dict:
    """The four input-pipeline variants, replayed from their recorded traces."""
    from membound.analysis import analyze
    from membound.demos.show import present_variants

    ceilings = recorded_ceilings()
    rows = [
        (name, what, analyze(recorded_trace(f"input-{name}"), ceilings))
        for name, what in RECORDED_PIPELINE.items()
    ]
    marked = all(a.step_marked for _, _, a in rows)
    console.print(
        "[bold]input pipeline, recorded on an H200[/bold] by `membound demo`: one loop (~2.7 ms "
        "of GPU compute per step, 64x3x224x224 fp32 batches = 38.5 MB) fed four ways; "
        + (
            "each trace holds the profiled steps of one variant."
            if marked
            else "traces without step markers: times below are per recorded window."
        )
    )
    return present_variants(
        rows,
        out,
        console,
        title="input pipeline (recorded, H200)",
        pairs=[("a-pageable", "c-prefetch")],
        per="step" if marked else "window",
    )


def scenarios(out: Path, console) -> dict:
    """Planted-bottleneck scenarios: what each produces as its top finding."""
    from membound.analysis import analyze
    from membound.demos.show import variants_table, write_variant

    ceilings = recorded_ceilings()
    rows = [
        (name, what, analyze(recorded_trace(name), ceilings))
        for name, what in RECORDED_SCENARIOS.items()
    ]
    variants_table(rows, "planted bottlenecks (recorded, H200; 4 steps each)", console)
    files = {name: write_variant(a, out, name, html=True) for name, _, a in rows}
    console.print(f"HTML reports: {', '.join(str(f['html']) for f in files.values())}")
    return {"files": files, "analyses": {name: a for name, _, a in rows}}
