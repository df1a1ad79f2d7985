"""`membound demo [layernorm|input-pipeline|all]`: the two classic experiments, measured here.

On a CUDA device both run live. Without one, what applies runs: this CPU's roofline, and the
analysis of real H200 traces shipped with the package; what needs a GPU is said plainly.
"""

from __future__ import annotations

import time
from pathlib import Path

HELP = "the two classic experiments measured here: LayerNorm precision/fusion, input pipeline"

DEMOS = ("layernorm", "input-pipeline", "all")


def add_arguments(parser) -> None:
    parser.add_argument(
        "which", nargs="?", default="all", choices=DEMOS, help="which demo (default: all)"
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        default="membound-demo",
        help="folder for the charts, timelines, report JSONs and HTML (default: ./membound-demo)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="smaller sizes and quick ceilings (seconds)"
    )
    parser.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default=None,
        help="cuda runs the live demos, cpu the replay of recorded traces (default: cuda if available)",
    )


def _out_dir(path: str) -> Path:
    from membound.errors import BadInput

    out = Path(path)
    if out.exists() and not out.is_dir():
        raise BadInput(f"--out {path!r} is a file; give a folder (it is created if missing).")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"cannot create --out folder {path!r} ({exc.strerror}).") from None
    return out


def run(args) -> int:
    import torch
    from rich.console import Console

    from membound.errors import BadInput

    console = Console()
    out = _out_dir(args.out)
    cuda = torch.cuda.is_available()
    if args.device == "cuda" and not cuda:
        raise BadInput("--device cuda: no CUDA device is available here; drop --device.")
    if args.device == "cpu":
        cuda = False
    which = ("layernorm", "input-pipeline") if args.which == "all" else (args.which,)
    t0 = time.perf_counter()
    if cuda:
        run_gpu(which, out, console, quick=args.quick)
    else:
        run_cpu(which, out, console)
    console.print(f"\nmembound demo done in {time.perf_counter() - t0:.1f} s; files in {out}/")
    return 0


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
