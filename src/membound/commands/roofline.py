"""`membound roofline`: measure (or load) the device's ceilings, show them, save JSON / chart."""

from __future__ import annotations

import argparse
import sys

HELP = "measure the device's ceilings (memory bandwidth, FLOP/s per dtype, host<->device copies); cached"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from membound.device.measure import SWEEP_ORDERS  # imports no torch

    parser.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default=None,
        help="device to measure (default: cuda if available, else cpu)",
    )
    parser.add_argument(
        "--json", metavar="F", default=None, help='write {"schema": 1, "device": {...}} to F'
    )
    parser.add_argument(
        "--plot",
        metavar="F.png|F.svg",
        default=None,
        help="draw the roofline chart to F (.png or .svg)",
    )
    parser.add_argument(
        "--refresh", action="store_true", help="re-measure even if cached ceilings exist"
    )
    parser.add_argument(
        "--quick", action="store_true", help="small buffers: a few seconds, numbers only indicative"
    )
    parser.add_argument(
        "--sweep-order",
        choices=SWEEP_ORDERS,
        default=None,
        help="order of the matmul sweep's shapes (default forward); reverse times the last "
        "shape first, to see whether the shape timed first sets the ceiling (clocks); "
        "implies --refresh",
    )


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from membound.device import get_ceilings
    from membound.device.lookup import cached_ceilings
    from membound.outputs import output_file
    from membound.report.ceilings import render
    from membound.report.roofline_chart import SUFFIXES

    # validate every output before spending a minute measuring
    json_path = output_file(args.json, "--json")
    plot_path = output_file(args.plot, "--plot", suffixes=SUFFIXES)
    err = Console(stderr=True)
    device = args.device
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
        err.print(
            f"membound roofline: measuring {device}"
            + ("" if device == "cuda" else " (no CUDA device found)")
        )
    refresh = args.refresh or args.sweep_order is not None  # an order only means a measurement
    before = cached_ceilings(device, quick=args.quick)
    ceilings = get_ceilings(
        device,
        refresh=refresh,
        progress=sys.stderr.isatty(),
        quick=args.quick,
        sweep_order=args.sweep_order or "forward",
    )
    cached = before is not None and not refresh
    render(ceilings, Console(), cached=cached, previous=before if refresh else None)
    if json_path is not None:
        from membound.report.json_report import write_ceilings

        write_ceilings(ceilings, json_path)
        err.print(f"wrote {json_path}")
    if plot_path is not None:
        from membound.report.roofline_chart import draw

        draw(ceilings, path=plot_path)
        err.print(f"wrote {plot_path}")
    return 0
