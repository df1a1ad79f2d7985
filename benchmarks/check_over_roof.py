"""Which ops of the recorded H200 traces run above their roof on a ceilings file (issue 16:
"no op above 100% of its roof on any recorded trace of examples/").

    PYTHONPATH=src python benchmarks/check_over_roof.py [CEILINGS_JSON] [--fixtures DIR]

Analyses every `h200_*/trace.json.gz` under the fixtures folder with the given ceilings
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
    a = p.parse_args()
    c = Ceilings.load(a.ceilings)
    over = 0
    for trace in sorted(Path(a.fixtures).glob("h200_*/trace.json.gz")):
        for r in analyze(trace, c).ops:
            f = max(r.achieved_bandwidth_fraction or 0.0, r.achieved_flops_fraction or 0.0)
            if f > 1.0:
                over += 1
                print(f"{trace.parent.name:34} {r.name[:48]:48} {r.memory_roof or r.compute:>6} "
                      f"{f:7.2%} {r.device_ms:8.2f} ms")  # fmt: skip
    print(f"{over} op(s) above their roof")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
