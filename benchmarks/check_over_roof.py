"""Which ops of the recorded H200 traces run above their roof on a ceilings file (issue 16:
"no op above 100% of its roof on any recorded trace of examples/").

    PYTHONPATH=src python benchmarks/check_over_roof.py [CEILINGS_JSON] [--fixtures DIR]

Analyses every `h200_*/trace.json.*` (`--glob`) under the fixtures folder with the given ceilings
(default: benchmarks/results/h200_ceilings.json) and prints one line per op whose achieved
bandwidth or FLOP rate is above 100% of its roof, then the count."""

from __future__ import annotations

import argparse
from pathlib import Path

from membound.analysis import analyze
from membound.device.ceilings import Ceilings

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "ceilings", nargs="?", default=str(ROOT / "benchmarks/results/h200_ceilings.json")
    )
    p.add_argument("--fixtures", default=str(ROOT / "tests/fixtures"))
    p.add_argument("--top", type=int, default=0, help="also list the N ops nearest their roof")
    p.add_argument(
        "--glob",
        default="h200_*/trace.json.*",
        help="the traces under --fixtures to check (default h200_*/trace.json.*)",
    )
    p.add_argument("--progress", action="store_true", help="a line for each trace as it is checked")
    a = p.parse_args()
    c = Ceilings.load(a.ceilings)
    rows = []
    for trace in sorted(Path(a.fixtures).glob(a.glob)):
        mine = []
        for r in analyze(trace, c).ops:
            f = max(r.achieved_bandwidth_fraction or 0.0, r.achieved_flops_fraction or 0.0)
            mine.append((f, trace.parent.name, r))
        rows += mine
        if a.progress:  # a line a trace, as it goes (a call cut short keeps what was checked)
            top = max((m[0] for m in mine), default=0.0)
            n = sum(m[0] > 1.0 for m in mine)
            print(
                f"{trace.parent.name}: {n} op(s) above their roof, the nearest at {top:.2%}",
                flush=True,
            )
    line = "{:34} {:48} {:>6} {:7.2%} {:8.2f} ms"
    over = [row for row in rows if row[0] > 1.0]
    for f, name, r in over:
        print(line.format(name, r.name[:48], r.memory_roof or r.compute, f, r.device_ms))
    print(f"{len(over)} op(s) above their roof")
    if a.top:
        print(f"the {a.top} nearest their roof:")
        for f, name, r in sorted(rows, key=lambda row: -row[0])[: a.top]:
            print(line.format(name, r.name[:48], r.memory_roof or r.compute, f, r.device_ms))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
