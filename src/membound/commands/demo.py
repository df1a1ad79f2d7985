"""`membound demo [layernorm|input-pipeline|all]`: the two classic experiments, measured here.

On a CUDA device both run live. Without one, what applies runs: this CPU's roofline, and the
analysis of real H200 traces shipped with the package; what needs a GPU is said plainly.
"""

from __future__ import annotations

import time

from membound.defaults import DEMO_OUT
from membound.demos.run import DEMOS

HELP = "the two classic experiments measured here: LayerNorm precision/fusion, input pipeline"


def add_arguments(parser) -> None:
    parser.add_argument(
        "which", nargs="?", default="all", choices=DEMOS, help="which demo (default: all)"
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        default=DEMO_OUT,
        help=f"folder for the charts, timelines, report JSONs and HTML (default: ./{DEMO_OUT})",
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


def run(args) -> int:
    from rich.console import Console

    from membound.demos.run import run as run_demo
    from membound.outputs import output_dir

    out = output_dir(args.out, "--out")  # checked (and created) before any measuring
    console = Console()
    t0 = time.perf_counter()
    run_demo(args.which, out, console, quick=args.quick, device=args.device)
    console.print(f"\nmembound demo done in {time.perf_counter() - t0:.1f} s; files in {out}/")
    return 0
