"""After `membound diagnose`'s script ends: measure what a worker-fed batch costs the
training thread here, pageable against pinned, and keep it in the capture meta.

A batch a DataLoader worker made lives in shared memory. The training thread pays for it
outside any call the timeline records: when it drops the batch, the pages are unmapped. With
`pin_memory=True` (or `membound.data.prefetch`) the loader's own thread receives, copies and
drops the shared batch, and the training thread holds pinned memory. On the H200's host,
38.5 MB batches from 8 workers (`benchmarks/probe_loader_host.py`,
`benchmarks/results/loader_host_2026-12-04f.jsonl`): dropping one cost the training thread
3.9-6.0 ms pageable and 0.01 ms pinned, on top of the copy. The Lightning fit and the timm ViT
saved 9.7-13.6 ms/step by pinning where `pageable-copy` had predicted 6-9 from the copies
alone; in their traces the GPU waited 5.4-8.2 ms/step in host gaps beside the copies.

`pageable-copy` (`analysis.rules.copies`) adds the GPU idle in those gaps, at most what this
measures. It runs only when the trace shows a loader with worker processes and pageable
host-to-device copies: in a process of its own, after the script (it never takes time from
the steps membound timed), a loader with `WORKERS` workers makes batches of the trace's
pageable bytes per batch, and the training thread's time to take (`next`), copy and drop
each is timed, without and with `pin_memory`. A failure is a note in the meta, never a
failed diagnose.

    python -m membound.trace.loader_probe --bytes 38535680   # prints one JSON line
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from membound.trace import meta_probe

#: the meta key the measurement (or why there is none) is kept under
META_KEY = "loader_host_cost"
#: how a note on a missing measurement begins
LABEL = "worker batch cost not measured"
#: seconds the probe may take (CUDA start-up, two loaders' workers)
TIMEOUT_S = 90.0
#: workers of the probe's loaders, batches timed per variant (after WARMUP), and the pause
#: before each so that the workers have it ready: the training thread's own cost is timed,
#: not a wait for a worker
WORKERS, BATCHES, WARMUP, PAUSE_S = 2, 9, 3, 0.05


class _Rows:
    """A dataset of `rows` rows of `width` fp32 values: batches of `batch` rows are one
    tensor of the trace's bytes per batch."""

    def __init__(self, rows: int, width: int):
        import torch

        self.row = torch.rand(width)
        self.rows = rows

    def __len__(self) -> int:
        return self.rows

    def __getitem__(self, i: int):
        return self.row.clone()


def measure(nbytes: int, workers: int = WORKERS, batches: int = BATCHES) -> dict[str, Any]:
    """{"bytes", "pageable": {...}, "pinned": {...}, "release_moved_ms", "next_moved_ms"}:
    the median ms the training thread spends taking (`next_ms`), copying (`copy_ms`) and
    dropping (`release_ms`) a worker-made batch of `nbytes`, without and with pin_memory,
    and what pinning moves off the training thread outside the copy (>= 0)."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device")
    batch = 16
    width = max(nbytes // (4 * batch), 1)
    out: dict[str, Any] = {"bytes": int(batch * width * 4), "workers": workers}
    for variant in ("pageable", "pinned"):
        loader = torch.utils.data.DataLoader(
            _Rows(batch * (batches + WARMUP + 2), width),
            batch_size=batch,
            num_workers=workers,
            pin_memory=variant == "pinned",
        )
        it = iter(loader)
        times: dict[str, list[float]] = {"next_ms": [], "copy_ms": [], "release_ms": []}
        for k in range(batches + WARMUP):
            time.sleep(PAUSE_S)
            t0 = time.perf_counter()
            x = next(it)
            t1 = time.perf_counter()
            y = x.to("cuda", non_blocking=True)
            t2 = time.perf_counter()
            del x
            t3 = time.perf_counter()
            torch.cuda.synchronize()
            del y
            if k >= WARMUP:
                for key, value in zip(times, (t1 - t0, t2 - t1, t3 - t2), strict=True):
                    value_ms = value * 1e3
                    times[key].append(value_ms)
        del it, loader
        out[variant] = {k: round(statistics.median(v), 3) for k, v in times.items()}
    for part in ("release", "next"):
        moved = out["pageable"][f"{part}_ms"] - out["pinned"][f"{part}_ms"]
        out[f"{part}_moved_ms"] = round(max(moved, 0.0), 3)
    return out


def batch_bytes(trace) -> int | None:
    """Pageable host-to-device bytes per batch of a loader with worker processes (the
    pageable bytes in the steps ÷ its `__next__` calls), or None: no such loader, or no
    pageable copy."""
    import numpy as np

    from membound.trace.model import DATALOADER_WORKERS, H2D, PAGEABLE

    cpu, gpu = trace.cpu, trace.gpu
    nexts = int(np.sum(cpu.role == DATALOADER_WORKERS)) if len(cpu) else 0
    if not nexts or not len(gpu):
        return None
    sel = (gpu.direction == H2D) & (gpu.host_memory == PAGEABLE)
    total = float(np.maximum(gpu.bytes[sel], 0).sum())
    return int(total / nexts) if total > 0 else None


def probe(meta_path: str | Path, timeout: float = TIMEOUT_S, run=subprocess.run) -> str:
    """Measure the trace's worker batch and keep the result in the capture meta at
    `meta_path` under `META_KEY`; returns one sentence saying what happened."""
    path = Path(meta_path)
    meta, nbytes, said = meta_probe.read_beside(
        path, LABEL, META_KEY, ("trace",), "no trace", batch_bytes
    )
    if said is not None:
        return said
    if nbytes is None:
        return "no worker-fed batch copied from pageable memory: worker batch cost not measured."
    cmd = [sys.executable, "-m", "membound.trace.loader_probe", "--bytes", str(nbytes)]
    result, why = meta_probe.run_json(cmd, timeout, run)
    if why is None and not isinstance(result, dict):
        why = "the probe printed no JSON object"
    if why is None:
        try:
            moved = float(result["release_moved_ms"])
        except (KeyError, TypeError, ValueError):
            why = "the probe's result has no release_moved_ms"
    if why is not None:
        return meta_probe.keep_failure(path, meta, META_KEY, LABEL, why, bytes=nbytes)
    meta_probe.keep(path, meta, META_KEY, result)
    return (
        f"measured a worker batch of {nbytes / 1e6:.1f} MB here: dropping it costs the "
        f"training thread {result['pageable']['release_ms']:.2f} ms pageable, "
        f"{result['pinned']['release_ms']:.2f} ms pinned ({moved:.2f} ms moved by pinning)."
    )


def release_moved_ms(meta: Any) -> float | None:
    """The measured ms per batch pinning moves off the training thread when it drops a
    worker batch, from a capture meta; None when not measured."""
    got = meta.get(META_KEY) if isinstance(meta, dict) else None
    try:
        value = float(got["release_moved_ms"]) if isinstance(got, dict) else None
    except (KeyError, TypeError, ValueError):
        return None
    return value if value is not None and value >= 0 else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bytes", type=int, required=True, help="bytes per batch")
    p.add_argument("--workers", type=int, default=WORKERS)
    p.add_argument("--batches", type=int, default=BATCHES)
    a = p.parse_args(argv)
    if a.bytes < 1 or a.workers < 1 or a.batches < 1:
        p.error("--bytes, --workers and --batches must be >= 1")
    print(json.dumps(measure(a.bytes, a.workers, a.batches)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
