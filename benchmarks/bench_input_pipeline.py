"""Feeding the GPU: the classic input-pipeline experiment, every variant side by side.

A fixed GPU workload (~2.5 ms per step) eats 64×3×224×224 batches (38.5 MB float32) from an
in-memory dataset, so CPU work is negligible and the host→device transfer is what is
measured. Variants:

  a-pageable      batches in pageable memory, `.to(cuda, non_blocking=True)` (silently sync)
  b-dl-pinned     DataLoader(num_workers=4, pin_memory=True) + `.to(non_blocking=True)`
  c-prefetch      membound.data.prefetch over the same pageable batches as (a)
  c-prefetch-dl   membound.data.prefetch over DataLoader(num_workers=4) (pageable batches)
  d-prefetch-u8   prefetch of uint8 batches + membound.data.Normalize on the GPU (¼ the bytes)
  timm / timm-u8  timm's PrefetchLoader over (b)'s DataLoader, when timm is installed

The workload, batches and core variants come from `membound.demos.input_pipeline` (one
definition, shared with `membound demo input-pipeline`).

Per variant: step time (wall time over N steps ÷ N, ending in a synchronize), GPU busy
(compute kernel time from CUDA events around the compute ÷ that same wall time), and from the
profiler's device-side memcpy records (chrome trace, every copy whichever thread issued it):
H2D bytes seen per step (checked against the batch: no copy unseen) and the per-copy rate
bytes ÷ copy-engine time, against the pinned ceiling measured in this run.

Second case, "starved": an expensive per-item CPU transform makes the loader itself slower
than the GPU; prefetching cannot fix that, and the table shows step ≈ loader time.

    PYTHONPATH=src python benchmarks/bench_input_pipeline.py --csv out.csv
    PYTHONPATH=src python benchmarks/bench_input_pipeline.py --quick   # CPU smoke test
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from harness import RESULTS_DIR, CsvRows, add_output_args, bench_ms  # noqa: E402
from membound.data import prefetch  # noqa: E402

# One workload, one set of batches and variants, shared with `membound demo input-pipeline`.
from membound.demos.input_pipeline import (  # noqa: E402
    MEAN,
    PIPELINE_SLACK,
    STD,
    ItemDataset,
    Workload,
    images,
    make_batches,
    time_steps,
)
from membound.demos.input_pipeline import variants as shared_variants  # noqa: E402

CUDA = torch.cuda.is_available()
DEV = torch.device("cuda" if CUDA else "cpu")


# -- data -------------------------------------------------------------------------------


def expensive_item_transform(rounds: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """A numeric per-item CPU transform heavy enough that the loader is the bottleneck."""

    def transform(x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        for _ in range(rounds):
            y = torch.tanh(y * 1.01 + 0.01)
        return y

    return transform


# -- measurement ------------------------------------------------------------------------


#: Steps run under the profiler to see every host→device copy from the GPU side.
PROFILED_STEPS = 8
#: Bytes seen per step may differ from the batch by the copies in flight at the window's
#: edges (a prefetcher issues copies up to `depth` batches ahead): ±2 batches over 8 steps.
SEEN_TOLERANCE = 2 / PROFILED_STEPS + 0.01


def run_variant(
    make_iter: Callable[[int], Iterator],
    to_device: Callable,
    work: Workload,
    steps: int,
    trace_path: Path | None = None,
) -> dict:
    """Warm up, time `steps` steps, then profile a few to see every H2D copy on the GPU.

    step time = host wall time over the `steps` steps (ending in a synchronize) ÷ steps:
    what a user waits per step, stalls included. GPU busy = the compute's kernel time
    (CUDA events around it) ÷ that same wall time, so busy ≈ compute_ms / step_ms for
    every variant. The median GPU start-to-start interval is kept as `median_period_ms`
    only to show burstiness (a bursty loader has a short median and a long mean).
    """
    warmup, profiled = 4, PROFILED_STEPS if CUDA else 0
    # Slack batches keep a prefetching pipeline full to the end: without them the profiled
    # window sees fewer copies than steps (the last batches were copied before it began).
    it = iter(make_iter(warmup + steps + profiled + PIPELINE_SLACK))
    for _ in range(warmup):
        work(to_device(next(it)))
    out = time_steps(it, to_device, work, steps)
    out.update(**H2D_NAN)
    if CUDA:
        out.update(_profile_h2d(it, to_device, work, profiled, trace_path))
    for _ in it:  # drain so DataLoader workers / prefetch threads finish cleanly
        pass
    return out


H2D_NAN = {"h2d_ms": float("nan"), "h2d_gbps": float("nan"), "h2d_bytes_per_step": float("nan")}


def h2d_from_trace(trace: dict) -> tuple[int, int, float]:
    """(copies, bytes, busy µs) of the host→device memcpys in a chrome trace from torch.

    These are CUPTI's device-side records: every copy on the device, whichever host thread
    issued it (the profiler's per-op tables only attribute copies to ops of profiled
    threads, which is how run 1 reported 215 GB/s over a 54 GB/s link). Each record's `dur`
    is the time the copy engine spent on that copy, so bytes ÷ dur cannot exceed the link.
    """
    n, nbytes, dur = 0, 0, 0.0
    for e in trace.get("traceEvents", []):
        if e.get("cat") != "gpu_memcpy" or "HtoD" not in str(e.get("name", "")):
            continue
        b = (e.get("args") or {}).get("bytes")
        if b is None or b < 0:
            raise ValueError(f"memcpy event without a byte count: {e.get('name')!r}")
        n, nbytes, dur = n + 1, nbytes + int(b), dur + float(e.get("dur", 0.0))
    return n, nbytes, dur


def _profile_h2d(it, to_device, work, steps: int, trace_path: Path | None) -> dict:
    """H2D copy time, bytes and per-copy rate per step, from the profiler's device records."""
    import json
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                work(to_device(next(it)))
            torch.cuda.synchronize()
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "trace.json"
            prof.export_chrome_trace(str(path))
            text = path.read_text()
        if trace_path is not None:
            import gzip

            trace_path.parent.mkdir(parents=True, exist_ok=True)
            with gzip.open(trace_path, "wt") as f:
                f.write(text)
        n, nbytes, dur_us = h2d_from_trace(json.loads(text))
    except Exception as exc:  # profiler quirks must not sink the whole benchmark
        print(f"  (profiler failed: {type(exc).__name__}: {exc})", file=sys.stderr)
        return dict(H2D_NAN)
    return {
        "h2d_ms": dur_us / 1e3 / steps,
        "h2d_gbps": nbytes / (dur_us * 1e3) if dur_us > 0 else float("nan"),
        "h2d_bytes_per_step": nbytes / steps,
        "h2d_copies": n,
    }


def seen_ok(seen_bytes: float, expected: float) -> bool:
    """Did the trace show (about) one batch of H2D bytes per step? Else a copy went unseen."""
    return abs(seen_bytes / expected - 1) <= SEEN_TOLERANCE if expected else seen_bytes == 0


def pinned_ceiling(nbytes: int) -> tuple[float, float]:
    """(pinned, pageable) H2D bytes/s for one copy of `nbytes`, measured now."""
    if not CUDA:
        return float("nan"), float("nan")
    dst = torch.empty(nbytes, dtype=torch.uint8, device=DEV)
    pinned = torch.empty(nbytes, dtype=torch.uint8).pin_memory().fill_(1)
    pageable = torch.ones(nbytes, dtype=torch.uint8)
    ms_pinned = bench_ms(lambda: dst.copy_(pinned, non_blocking=True))
    ms_pageable = bench_ms(lambda: dst.copy_(pageable, non_blocking=True))
    return nbytes / ms_pinned * 1e3, nbytes / ms_pageable * 1e3


# -- the experiment ---------------------------------------------------------------------


def _to_dev(batch):
    return images(batch).to(DEV, non_blocking=True)


def _already(batch):
    return images(batch)


def variants(f32: list, u8: list, workers: int, steps: int) -> dict[str, tuple]:
    """name -> (make_iter(n), to_device, bytes per step, what it is)."""
    out = shared_variants(f32, u8, workers, DEV)
    imgs_f32 = torch.cat([b[0] for b in f32])
    imgs_u8 = torch.cat([b[0] for b in u8])
    bsz = f32[0][0].shape[0]
    f32_bytes = f32[0][0].nbytes + f32[0][1].nbytes
    u8_bytes = u8[0][0].nbytes + u8[0][1].nbytes

    def dl(imgs, n, pin):
        ds = ItemDataset(imgs, n * bsz)
        return torch.utils.data.DataLoader(
            ds, batch_size=bsz, num_workers=workers, pin_memory=pin and CUDA
        )

    try:
        from timm.data.loader import PrefetchLoader
    except Exception:
        print("timm not installed: skipping timm's PrefetchLoader", file=sys.stderr)
        return out
    if CUDA:

        def timm_loader(images, n):
            try:
                return PrefetchLoader(
                    dl(images, n, True), mean=MEAN, std=STD, device=DEV, img_dtype=torch.bfloat16
                )
            except TypeError:  # older timm signature
                return PrefetchLoader(dl(images, n, True))

        out["timm"] = (
            lambda n: timm_loader(imgs_f32, n),
            _already,
            f32_bytes,
            "timm PrefetchLoader",
        )
        out["timm-u8"] = (lambda n: timm_loader(imgs_u8, n), _already, u8_bytes, "timm PrefetchLoader uint8")  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes: a CPU smoke test")
    add_output_args(p, RESULTS_DIR / "input_pipeline.csv")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--target-ms", type=float, default=2.5, help="GPU compute per step")
    p.add_argument("--only", default="", help="comma-separated variant names")
    p.add_argument("--trace-dir", type=Path, default=None, help="keep each profiled window")
    args = p.parse_args(argv)

    quick = args.quick or not CUDA
    bsz, size = (8, 64) if quick else (64, 224)
    steps = args.steps or (6 if quick else 30)
    workers = min(args.workers, 2) if quick else args.workers
    n_distinct = 3 if quick else 6
    f32, u8 = make_batches(bsz, size, n_distinct)
    batch_bytes = f32[0][0].nbytes
    work = Workload(args.target_ms, 3, 256 if quick else 4096, DEV)
    resident = f32[0][0].to(DEV)
    compute_alone = bench_ms(lambda: work(resident))
    pinned_bps, pageable_bps = pinned_ceiling(batch_bytes)
    print(
        f"device {torch.cuda.get_device_name() if CUDA else 'cpu'}; batch {bsz}x3x{size}x{size} "
        f"= {batch_bytes / 1e6:.1f} MB fp32; compute alone {compute_alone:.2f} ms/step; "
        f"H2D pinned {pinned_bps / 1e9:.1f} GB/s, pageable {pageable_bps / 1e9:.1f} GB/s; "
        f"{os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}"
    )
    rows = CsvRows(args.csv, args.run)
    table = []

    def record(case, name, what, nbytes, res, **extra):
        gbps = res["h2d_gbps"]
        seen = res["h2d_bytes_per_step"]
        ok = seen_ok(seen, nbytes) and not gbps > 1.05 * pinned_bps / 1e9
        row = rows.add(
            case=case,
            variant=name,
            what=what,
            bytes=nbytes,  # per step: the batch sent to the GPU
            flops=work.flops(f32[0][0]),  # per step: the fixed GPU workload
            step_ms=round(res["step_ms"], 4),
            median_period_ms=round(res["median_period_ms"], 4),
            compute_ms=round(res["compute_ms"], 4),
            compute_alone_ms=round(compute_alone, 4),
            gpu_busy=round(res["gpu_busy"], 4),
            h2d_ms_per_step=round(res["h2d_ms"], 4),
            h2d_gbps=round(gbps, 3),
            h2d_bytes_seen_per_step=round(seen, 1),
            h2d_seen_ok=ok,
            pinned_ceiling_gbps=round(pinned_bps / 1e9, 3),
            pageable_gbps=round(pageable_bps / 1e9, 3),
            h2d_fraction_of_pinned=round(gbps * 1e9 / pinned_bps, 4),
            predicted_overlapped_ms=round(max(compute_alone, nbytes / pinned_bps * 1e3), 4),
            loader_ms_per_batch=round(extra.get("loader_ms", float("nan")), 3),
            loader_thread_ms_per_batch=round(extra.get("loader_thread_ms", float("nan")), 3),
            steps=steps,
            profiled_steps=PROFILED_STEPS if CUDA else 0,
        )
        table.append(row)
        print(
            f"  {case:7s} {name:14s} step {res['step_ms']:7.2f} ms  busy {res['gpu_busy']:6.1%}  "
            f"H2D {gbps:6.1f} GB/s  {seen / 1e6:5.1f} MB/step seen of {nbytes / 1e6:5.1f}",
            flush=True,
        )
        if CUDA and not ok:
            print(
                f"  CHECK {case} {name}: H2D seen {seen / 1e6:.1f} MB/step vs {nbytes / 1e6:.1f} "
                f"expected, {gbps:.1f} GB/s vs {pinned_bps / 1e9:.1f} pinned ceiling",
                flush=True,
            )

    def trace(case, name):
        return None if args.trace_dir is None else args.trace_dir / f"{case}-{name}.json.gz"

    only = set(filter(None, args.only.split(",")))
    for name, (make, to_dev, nbytes, what) in variants(f32, u8, workers, steps).items():
        if only and name not in only:
            continue
        try:
            res = run_variant(make, to_dev, work, steps, trace("fed", name))
            record("fed", name, what, nbytes, res)
        except Exception as exc:
            print(f"  {name}: FAILED {type(exc).__name__}: {exc}", file=sys.stderr)

    # Case 2: the loader itself is slower than the GPU (per-item CPU work).
    if not only or "starved" in only:
        starved(f32, work, bsz, steps, record, compute_alone, trace)
    print_table(table)
    print(f"rows appended to {args.csv}")
    return 0


def _time_loader(make_loader, batches: int, threads: int | None = None) -> tuple[float, int]:
    """(ms per batch, torch threads) of iterating the loader alone on the calling thread."""
    if threads is not None:
        torch.set_num_threads(threads)
    it = iter(make_loader(batches + 1))
    next(it)  # the first batch pays the iterator's start-up
    t0 = time.perf_counter()
    for _ in range(batches):
        next(it)
    return (time.perf_counter() - t0) * 1e3 / batches, torch.get_num_threads()


def _in_fresh_thread(fn, *args):
    """Run fn on a new thread, as a prefetcher's producer would, and return its result."""
    out: list = []
    t = threading.Thread(target=lambda: out.append(fn(*args)), name="bench-fresh")
    t.start()
    t.join()
    return out[0]


def starved(f32, work, bsz, steps, record, compute_ms: float, trace) -> None:
    images = torch.cat([b[0] for b in f32])
    n = max(4, steps // 3)
    transform = expensive_item_transform(1)
    one = ItemDataset(images, bsz, transform)
    t0 = time.perf_counter()
    [one[i] for i in range(bsz)]
    per_round = (time.perf_counter() - t0) * 1e3
    # Aim for a loader ~4x slower than the GPU work, so starvation is unmistakable.
    rounds = min(4, max(1, round(4 * compute_ms / per_round)))
    transform = expensive_item_transform(rounds)

    def loader(k):
        ds = ItemDataset(images, k * bsz, transform)
        return torch.utils.data.DataLoader(ds, batch_size=bsz, num_workers=0)

    # The loader alone: on this thread, on a fresh thread (what a producer thread inherits:
    # after a pin_memory DataLoader ran, 1 torch thread), and on a fresh thread given this
    # thread's count (what membound.data.prefetch now does). Run 1's 61 vs 39 ms came from
    # the second; the third should match the first.
    main_threads = torch.get_num_threads()
    loader_ms, _ = _time_loader(loader, 3)
    fresh_ms, fresh_threads = _in_fresh_thread(_time_loader, loader, 3)
    fixed_ms, _ = _in_fresh_thread(_time_loader, loader, 3, main_threads)
    # Setting a count on any thread also sets what new threads inherit: put back what we
    # found, so the prefetcher below meets the same state as in a user's process.
    _in_fresh_thread(torch.set_num_threads, fresh_threads)
    print(
        f"  starved loader alone, ms/batch: main thread {loader_ms:.1f} ({main_threads} torch "
        f"threads); fresh thread {fresh_ms:.1f} ({fresh_threads}); fresh thread set to "
        f"{main_threads}: {fixed_ms:.1f}",
        flush=True,
    )
    nbytes = f32[0][0].nbytes + f32[0][1].nbytes
    for name, make, to_dev in (
        ("a-pageable", loader, _to_dev),
        ("c-prefetch", lambda k: prefetch(loader(k), DEV), _already),
    ):
        try:
            res = run_variant(make, to_dev, work, n, trace("starved", name))
            what = f"per-item CPU transform x{rounds}"
            record(
                "starved", name, what, nbytes, res, loader_ms=loader_ms, loader_thread_ms=fresh_ms
            )
        except Exception as exc:
            print(f"  starved {name}: FAILED {type(exc).__name__}: {exc}", file=sys.stderr)


def print_table(rows: list[dict]) -> None:
    print()
    head = (
        f"{'case':8s}{'variant':15s}{'step ms':>9s}{'busy':>7s}{'H2D GB/s':>10s}"
        f"{'of pinned':>10s}{'MB/step':>9s}{'seen MB':>9s}{'loader ms':>10s}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        flag = "" if r["h2d_seen_ok"] or not CUDA else "  CHECK: copies unseen or rate > link"
        print(
            f"{r['case']:8s}{r['variant']:15s}{r['step_ms']:9.2f}"
            f"{r['gpu_busy']:7.0%}{r['h2d_gbps']:10.1f}{r['h2d_fraction_of_pinned']:10.0%}"
            f"{r['bytes'] / 1e6:9.1f}{r['h2d_bytes_seen_per_step'] / 1e6:9.1f}"
            f"{r['loader_ms_per_batch']:10.1f}{flag}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
