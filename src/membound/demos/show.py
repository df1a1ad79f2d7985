"""Presenting a set of analysed variants of one loop: a table (step time, GPU busy, findings),
a timeline picture and a report JSON per variant, and the before/after comparison.

Shared by the live input-pipeline demo (GPU) and the replay of recorded traces (any machine).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _num(x, fmt: str) -> str:
    return "-" if x is None or x != x else fmt.format(x)  # None or NaN: not measured


def findings_text(analysis, limit: int = 3) -> str:
    if not analysis.findings:
        return "none"
    parts = [f"{f.code} {f.time_lost_ms_per_step:.2f}" for f in analysis.findings[:limit]]
    more = len(analysis.findings) - limit
    return ", ".join(parts) + (f" (+{more})" if more > 0 else "")


def write_variant(analysis, out: Path, name: str, *, html: bool = False) -> dict[str, Path]:
    """Report JSON, timeline PNG (and HTML if asked) of one variant under `out`."""
    from membound.report import html as html_report
    from membound.report import json_report

    out.mkdir(parents=True, exist_ok=True)
    files = {"json": json_report.write(analysis, out / f"{name}.json")}
    if analysis.has_gpu and analysis.steps:
        from membound.demos import activity

        kb = analysis.gpu_computing_fraction
        files["timeline"] = activity.draw(
            analysis.trace_path,
            out / f"{name}.timeline.png",
            f"{name}: {analysis.median_step_ms:.2f} ms per "
            f"{'step' if analysis.step_marked else 'window (no step markers)'}, GPU busy "
            f"{analysis.gpu_busy_fraction:.0%}, computing {kb:.0%}",
        )
    if html:
        files["html"] = html_report.write(analysis, out / f"{name}.html")
    return files


def variants_table(
    rows: list[tuple[str, str, Any]],
    title: str,
    console,
    per: str = "step",
    timed: dict[str, dict] | None = None,
):
    """rows: (name, what fed it, analysis). `timed`: name -> {"step_ms", "gpu_busy"} of the
    same variant run without the profiler, shown beside the profiled numbers."""
    from rich.table import Table

    for name, what, _ in rows:
        console.print(f"  [bold]{name}[/bold]: {what}")
    t = Table(title=title, title_justify="left")
    t.add_column("variant")
    if timed is not None:
        t.add_column(f"{per} ms\nno profiler", justify="right")
        t.add_column("computing\nno profiler", justify="right")
    prof = "\nprofiled" if timed is not None else ""
    t.add_column(f"{per} ms{prof}", justify="right")
    t.add_column(f"GPU busy{prof}", justify="right")
    t.add_column(f"kernels{prof}", justify="right")
    t.add_column("findings (ms lost per step)")
    for name, _, a in rows:
        busy = "-" if a.gpu_busy_fraction is None else f"{a.gpu_busy_fraction:.0%}"
        kb = a.gpu_computing_fraction
        plain = []
        if timed is not None:
            r = timed.get(name) or {}
            plain = [_num(r.get("step_ms"), "{:.2f}"), _num(r.get("gpu_busy"), "{:.0%}")]
        t.add_row(
            name,
            *plain,
            f"{a.median_step_ms:.2f}",
            busy,
            "-" if kb is None else f"{kb:.0%}",
            findings_text(a).replace(", ", "\n"),
        )
    console.print(t)
    if timed is not None:
        console.print(
            "no profiler: wall time per step over the timed steps (ending in a synchronize), "
            "and the compute's kernel time (CUDA events) / that wall time; profiled: the "
            "median step of the membound.profile capture (the profiler adds host overhead)."
        )
    console.print(
        "GPU busy: kernels, copies or memsets running; kernels: computing only (a copy from "
        "pageable memory keeps the GPU 'busy' but not computing)."
    )


def present_variants(
    rows: list[tuple[str, str, Any]],
    out: Path,
    console,
    *,
    title: str,
    pairs: list[tuple[str, str]],
    per: str = "step",
    timed: dict[str, dict] | None = None,
) -> dict[str, Any]:
    """Table, files per variant, then `membound compare` of each (before, after) pair."""
    from membound.analysis.compare import compare, load_report
    from membound.report.compare import render

    variants_table(rows, title, console, per=per, timed=timed)
    names = {name for name, _, _ in rows}
    pairs = [(b, a) for b, a in pairs if b in names and a in names]
    with_html = {n for pair in pairs for n in pair}
    files = {}
    for name, _, a in rows:
        files[name] = write_variant(a, out, name, html=name in with_html)
    console.print(f"timelines, report JSONs and HTML: {out}/")
    comparisons = {}
    for before, after in pairs:
        b, a = files[before]["json"], files[after]["json"]
        console.print(f"\n[bold]$ membound compare {b} {a}[/bold]")
        cmp = compare(load_report(b), load_report(a))
        render(cmp, console, before_label=before, after_label=after)
        comparisons[(before, after)] = cmp
    first = next(iter(comparisons.values()), None)
    return {"files": files, "compare": first, "comparisons": comparisons}
