"""Append the CSVs a device run wrote (e.g. `$GPU_OUT/add_norm/*.csv`) to the repository's ones.

Each `SRC/<name>.csv` is appended to `DEST/<name>.csv` (created if new), columns matched by name
(a new column rewrites the destination with the union, as the benchmarks themselves do). Rows
without a run number take `--run`; a file whose rows still have none is refused: a row in the
repository must say which run produced it.

    python benchmarks/merge_results.py /tmp/gpu_out/add_norm benchmarks/results/add_norm --run 56
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import append_rows  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path, help="folder of the run's CSVs")
    ap.add_argument("dest", type=Path, help="folder of the one-per-benchmark CSVs")
    ap.add_argument("--run", default="", help="run number for rows that have none")
    args = ap.parse_args(argv)
    status = 0
    for src in sorted(args.src.glob("*.csv")):
        with src.open(newline="") as f:
            rows = list(csv.DictReader(f))
        for row in rows:
            if not row.get("run"):
                row["run"] = args.run
        if any(not row["run"] for row in rows):
            print(f"{src}: rows without a run number; pass --run N (nothing appended)")
            status = 1
            continue
        append_rows(args.dest / src.name, rows)
        print(f"{src} -> {args.dest / src.name}: {len(rows)} rows")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
