"""LayerNorm 32768x4096 placed on the measured roofline, fp32 and bf16 storage.

Two views of the same op: `membound.roofline.measure` (profiler + cost model, per aten op)
and a direct check (do_bench median, minimal bytes = read x + write y + weights) against the
copy bandwidth measured in this run. Both should call it memory-bound, at a large fraction
of copy bandwidth.

    PYTHONPATH=src python benchmarks/bench_roofline.py [--run N] [--csv out.csv]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import RESULTS_DIR, CsvRows, add_output_args, bench_ms  # noqa: E402

ROWS, COLS = 32768, 4096


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_args(parser, RESULTS_DIR / "roofline.csv")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--quick", action="store_true", help="quick ceilings, smaller tensor (CPU smoke test)"
    )
    args = parser.parse_args()

    from rich.console import Console

    from membound.device import get_ceilings
    from membound.roofline import measure

    console = Console(width=160)
    ceil = get_ceilings(args.device, quick=args.quick, progress=False)
    rows, cols = (1024, 1024) if args.quick else (ROWS, COLS)
    csv = CsvRows(args.csv, args.run)
    summary = []
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(rows, cols, device=args.device, dtype=dtype)
        w = torch.randn(cols, device=args.device, dtype=dtype)
        b = torch.randn(cols, device=args.device, dtype=dtype)
        table = measure(F.layer_norm, x, (cols,), w, b, ceilings=ceil)
        table.print(console)
        top = table.rows[0]  # the op owning most device time: native_layer_norm
        p = top.placement
        # direct check: minimal bytes and the usual 8 FLOP/element estimate are only for the CSV
        nbytes = 2 * x.numel() * x.element_size() + 2 * cols * x.element_size()
        flops = 8 * x.numel()
        ms = (
            bench_ms(lambda x=x, w=w, b=b: F.layer_norm(x, (cols,), w, b))
            if args.device == "cuda"
            else top.device_ms
        )
        bw_frac = nbytes / (ms / 1e3) / ceil.memory_bandwidth
        csv.add(
            op="layer_norm",
            shape=f"{rows}x{cols}",
            dtype=str(dtype).removeprefix("torch."),
            bytes=nbytes,
            flops=flops,
            median_ms=round(ms, 4),
            copy_bandwidth_gbs=round(ceil.memory_bandwidth / 1e9, 1),
            fraction_of_copy_bw=round(bw_frac, 3),
            measure_op=top.name,
            measure_bound=top.bound,
            measure_bw_fraction=round(p.achieved_bandwidth_fraction, 3) if p else "",
        )
        summary.append(
            (str(dtype).removeprefix("torch."), top.name, top.bound, top.device_ms, p, ms, bw_frac)
        )

    print(
        f"\nlayer_norm {rows}x{cols} on {ceil.name}, copy bandwidth {ceil.memory_bandwidth / 1e12:.2f} TB/s"
    )
    print(
        f"{'dtype':9} {'op':26} {'bound':8} {'measure ms':>10} {'of copy BW':>10} | {'do_bench ms':>11} {'of copy BW':>10}"
    )
    for dt, name, bound, dev_ms, p, ms, frac in summary:
        measured = f"{p.achieved_bandwidth_fraction:.0%}" if p else "n/a"
        print(
            f"{dt:9} {name:26} {str(bound):8} {dev_ms:10.3f} {measured:>10} | {ms:11.3f} {frac:10.0%}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
