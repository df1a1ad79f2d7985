"""Shared benchmark harness: timing, environment stamp, CSV rows, measured copy bandwidth.

Every benchmark row says what the work must move/do (`bytes`, `flops`), the median time, and
the fraction of a ceiling measured in the same run. Each benchmark appends to one CSV (under
`results/`, or `--csv`), every row stamped with its `run` (`--run N`, or the environment
variable named by `RUN_VAR`, read here only), gpu, versions and date. Run any benchmark from
anywhere: `PYTHONPATH=src python benchmarks/<path>.py [--run N] [--csv out.csv]`. torch is
imported where it is used (a benchmark of trace analysis need not load it).
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import os
import platform
from collections.abc import Callable
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"
#: the run number stamped on rows when `--run` is not given (e.g. `MEMBOUND_BENCH_RUN=56`)
RUN_VAR = "MEMBOUND_BENCH_RUN"
#: columns every row starts and ends with
LEAD, ENV = ("run",), ("gpu", "torch", "triton", "date")


def env_info() -> dict[str, str]:
    """Columns stamped on every row: which GPU, which versions, when."""
    import torch

    gpu = (
        torch.cuda.get_device_name() if torch.cuda.is_available() else platform.processor() or "cpu"
    )
    try:
        import triton

        triton_version = triton.__version__
    except Exception:  # triton is optional
        triton_version = ""
    return {
        "gpu": gpu,
        "torch": torch.__version__,
        "triton": triton_version,
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d"),
    }


def add_output_args(parser: argparse.ArgumentParser, default_csv: Path) -> None:
    """`--csv` (default: this benchmark's one CSV) and `--run` (default: $MEMBOUND_BENCH_RUN)."""
    parser.add_argument("--csv", type=Path, default=default_csv, help=f"default {default_csv}")
    parser.add_argument(
        "--run", default=os.environ.get(RUN_VAR, ""), help=f"run number (default ${RUN_VAR})"
    )


def bench_ms(fn: Callable[[], object], *, warmup_ms: float = 25, rep_ms: float = 100) -> float:
    """Median milliseconds of `fn()`; device events on CUDA, wall clock on CPU.

    The same timing membound's own measurements use (`membound.device.timing`)."""
    import torch

    from membound.device.timing import cuda_median_ms, wall_median_ms

    if torch.cuda.is_available():
        return cuda_median_ms(fn, warmup_ms=warmup_ms, rep_ms=rep_ms)
    return wall_median_ms(fn, rep_ms=rep_ms, max_reps=1 << 30)


def copy_bandwidth(nbytes: int = 2 << 30) -> float:
    """Device-to-device copy bandwidth in bytes/s (read + write), measured now."""
    import torch

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    if dev == "cpu":
        nbytes = min(nbytes, 256 << 20)
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=dev).uniform_()
    dst = torch.empty_like(src)
    ms = bench_ms(lambda: dst.copy_(src))
    return 2 * src.numel() * src.element_size() / (ms / 1e3)


def append_rows(path: Path, rows: list[dict]) -> None:
    """Append `rows` to the CSV at `path`. A row with columns the file lacks rewrites the file
    with the union of both (old rows get empty cells there): benchmarks gain columns over
    time, and one CSV per benchmark must hold every run's rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    old_cols: list[str] = []
    if path.exists() and path.stat().st_size:
        with path.open(newline="") as f:
            old_cols = next(csv.reader(f), [])
    new = [c for r in rows for c in r if c not in old_cols]
    cols = _order(old_cols + list(dict.fromkeys(new)))
    if old_cols and cols != old_cols:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f)) + rows
        mode = "w"
    else:
        mode = "a" if old_cols else "w"
    with path.open(mode, newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, restval="")
        if mode == "w":
            w.writeheader()
        w.writerows(rows)


def _order(cols: list[str]) -> list[str]:
    """`run` first, the environment stamp last, the rest as they came."""
    middle = [c for c in cols if c not in LEAD and c not in ENV]
    return [c for c in LEAD if c in cols] + middle + [c for c in ENV if c in cols]


class CsvRows:
    """Append rows (dicts) to one CSV per benchmark, each stamped with its run and `env_info()`.
    Every row states `bytes` and `flops` (keyword-only: a row without them is an error; "" where
    a quantity does not apply)."""

    def __init__(self, path: str | os.PathLike, run: str | int = ""):
        self.path = Path(path)
        self.run = str(run)
        self.env = env_info()
        self.rows: list[dict] = []

    def add(self, *, bytes, flops, **row) -> dict:
        full = {"run": self.run, **row, "bytes": bytes, "flops": flops, **self.env}
        self.rows.append(full)
        append_rows(self.path, [full])
        return full
