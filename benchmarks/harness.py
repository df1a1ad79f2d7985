"""Shared benchmark harness: timing, environment stamp, CSV rows, measured copy bandwidth.

Every benchmark row says what the work must move/do (bytes, FLOPs), the median time, and
the fraction of a ceiling measured in the same run. Run any benchmark from anywhere:
`PYTHONPATH=src python benchmarks/bench_x.py --csv out.csv`.
"""

from __future__ import annotations

import csv
import datetime as _dt
import os
import platform
from collections.abc import Callable
from pathlib import Path

import torch

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def env_info() -> dict[str, str]:
    """Columns stamped on every row: which GPU, which versions, when."""
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


def bench_ms(fn: Callable[[], object], *, warmup_ms: float = 25, rep_ms: float = 100) -> float:
    """Median milliseconds of `fn()`; device events on CUDA, wall clock on CPU.

    The same timing membound's own measurements use (`membound.device.timing`)."""
    from membound.device.timing import cuda_median_ms, wall_median_ms

    if torch.cuda.is_available():
        return cuda_median_ms(fn, warmup_ms=warmup_ms, rep_ms=rep_ms)
    return wall_median_ms(fn, rep_ms=rep_ms, max_reps=1 << 30)


def copy_bandwidth(nbytes: int = 2 << 30) -> float:
    """Device-to-device copy bandwidth in bytes/s (read + write), measured now."""
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    if dev == "cpu":
        nbytes = min(nbytes, 256 << 20)
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=dev).uniform_()
    dst = torch.empty_like(src)
    ms = bench_ms(lambda: dst.copy_(src))
    return 2 * src.numel() * src.element_size() / (ms / 1e3)


class CsvRows:
    """Append rows (dicts) to one CSV per benchmark, each stamped with `env_info()`."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.env = env_info()
        self.rows: list[dict] = []

    def add(self, **row) -> dict:
        full = {**row, **self.env}
        self.rows.append(full)
        new = not self.path.exists()
        with self.path.open("a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(full))
            if new:
                w.writeheader()
            w.writerow(full)
        return full
