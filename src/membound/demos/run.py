"""`membound demo`'s orchestration: which experiments run, live on a CUDA device or, without
one, what applies (this CPU's roofline, the recorded H200 traces analysed here)."""

from __future__ import annotations

from pathlib import Path

from membound.errors import BadInput

#: what `membound demo` accepts
DEMOS = ("layernorm", "input-pipeline", "all")


def run(which: str, out: Path, console, *, quick: bool = False, device: str | None = None) -> dict:
    """Run `which` (one of `DEMOS`) into `out`; `device` "cuda" | "cpu" | None (cuda if
    available). Returns what each experiment returned, by name."""
    import torch

    cuda = torch.cuda.is_available()
    if device == "cuda" and not cuda:
        raise BadInput("--device cuda: no CUDA device is available here; drop --device.")
    if device == "cpu":
        cuda = False
    chosen = ("layernorm", "input-pipeline") if which == "all" else (which,)
    if cuda:
        return run_gpu(chosen, out, console, quick=quick)
    if quick:
        console.print("(--quick: without a GPU the demo is already its quick form)")
    return run_cpu(chosen, out, console)


def run_gpu(which, out: Path, console, *, quick: bool) -> dict:
    results = {}
    if "layernorm" in which:
        from membound.demos import layernorm

        console.rule("layernorm: the memory wall inside the GPU")
        results["layernorm"] = layernorm.run(out / "layernorm", console, quick=quick)
    if "input-pipeline" in which:
        from membound.demos import input_pipeline

        console.rule("input-pipeline: the memory wall between host and GPU")
        results["input-pipeline"] = input_pipeline.run(out / "input-pipeline", console, quick=quick)
    return results


def run_cpu(which, out: Path, console) -> dict:
    """No GPU: this CPU's roofline, then the recorded H200 traces analysed here."""
    from membound.demos import layernorm, recorded
    from membound.device import get_ceilings
    from membound.report.ceilings import render as render_ceilings
    from membound.report.roofline_chart import draw

    console.print(
        "[bold yellow]No CUDA device here.[/bold yellow] Running what applies: this CPU's "
        "roofline, and membound's analysis of real traces recorded on an H200 (shipped with "
        "the package). Run `membound demo` on a machine with an NVIDIA GPU for the live "
        "measurements."
    )
    results: dict = {}
    console.rule("roofline of this CPU (quick measurement)")
    ceilings = get_ceilings("cpu", quick=True, progress=False)
    try:
        render_ceilings(ceilings, console)
    except Exception:  # the table is a nicety; the chart below carries the same numbers
        console.print(f"memory bandwidth {ceilings.memory_bandwidth / 1e9:.1f} GB/s")
    chart = out / "roofline-cpu.png"
    draw(ceilings, path=chart)
    console.print(f"roofline chart: {chart}")
    results["ceilings"] = ceilings
    if "layernorm" in which:
        console.rule("layernorm")
        console.print(layernorm.gpu_needed_note())
        results["layernorm"] = None
    if "input-pipeline" in which:
        console.rule("input-pipeline: recorded on an H200, analysed here")
        console.print(
            "(live capture needs a CUDA GPU; these are the benchmark's traces of the same loop)"
        )
        results["input-pipeline"] = recorded.input_pipeline(out / "input-pipeline", console)
        console.rule("planted bottlenecks: recorded on an H200, analysed here")
        results["scenarios"] = recorded.scenarios(out / "scenarios", console)
    return results
