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

Per variant: step time (median of GPU start-to-start intervals), GPU busy (compute kernel
time ÷ wall, from CUDA events around the compute), H2D time per step and achieved GB/s (from
profiler memcpy events), both against the pinned ceiling measured in this run.

Second case, "starved": an expensive per-item CPU transform makes the loader itself slower
than the GPU; prefetching cannot fix that, and the table shows step ≈ loader time.

    PYTHONPATH=src python benchmarks/bench_input_pipeline.py --csv out.csv
    PYTHONPATH=src python benchmarks/bench_input_pipeline.py --quick   # CPU smoke test
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from harness import RESULTS_DIR, CsvRows, bench_ms  # noqa: E402
from membound.data import Normalize, prefetch  # noqa: E402

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
CUDA = torch.cuda.is_available()
DEV = torch.device("cuda" if CUDA else "cpu")


# -- data -------------------------------------------------------------------------------


class ItemDataset(torch.utils.data.Dataset):
    """Map-style, per-item tensors (the realistic DataLoader path), cycling a small pool."""

    def __init__(self, images: torch.Tensor, length: int, transform: Callable | None = None):
        self.images, self.length, self.transform = images, length, transform

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int):
        x = self.images[i % len(self.images)]
        if self.transform is not None:
            x = self.transform(x)
        return x, i % 1000


def cycle_batches(batches: list, steps: int) -> Iterator:
    """The in-memory loader of (a)/(c)/(d): pre-built pageable batches, repeated."""
    return itertools.islice(itertools.cycle(batches), steps)


def expensive_item_transform(rounds: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """A numeric per-item CPU transform heavy enough that the loader is the bottleneck."""

    def transform(x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        for _ in range(rounds):
            y = torch.tanh(y * 1.01 + 0.01)
        return y

    return transform


# -- the GPU workload -------------------------------------------------------------------


class Workload:
    """A conv stem reading the batch, then a chain of bf16 matmuls: ~target_ms of GPU work."""

    def __init__(self, target_ms: float, channels: int, size: int):
        dt = torch.bfloat16 if CUDA else torch.float32
        g = torch.Generator(device="cpu").manual_seed(0)
        self.dtype = dt
        self.conv = (torch.randn(32, channels, 3, 3, generator=g) * 0.1).to(DEV, dt)
        self.w = (torch.randn(size, size, generator=g) / size**0.5).to(DEV, dt)
        self.z0 = torch.randn(size, size, generator=g).to(DEV, dt)
        self.repeats = 1
        x = torch.rand(2, channels, 32, 32, device=DEV)
        one = bench_ms(lambda: self(x), rep_ms=50)
        self.repeats = 11
        eleven = bench_ms(lambda: self(x), rep_ms=50)
        per_mm = max((eleven - one) / 10, 1e-3)
        self.repeats = max(1, round((target_ms - (one - per_mm)) / per_mm))
        self.size = size

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.conv2d(x.to(self.dtype), self.conv, stride=4)
        z = self.z0 + y.mean()  # depends on the batch: compute cannot start before it lands
        for _ in range(self.repeats):
            z = z @ self.w
        return z

    def flops(self, batch: torch.Tensor) -> float:
        n, c, h, w = batch.shape
        conv = 2 * n * 32 * c * 9 * (h // 4) * (w // 4)
        return conv + self.repeats * 2 * self.size**3


# -- measurement ------------------------------------------------------------------------


def _images(batch):
    return batch[0] if isinstance(batch, (tuple, list)) else batch


def run_variant(
    make_iter: Callable[[int], Iterator], to_device: Callable, work: Workload, steps: int
) -> dict:
    """Warm up, time `steps` steps with CUDA events, then profile a few for H2D copies."""
    warmup, profiled = 4, 4 if CUDA else 0
    it = iter(make_iter(warmup + steps + profiled))
    for _ in range(warmup):
        work(to_device(next(it)))
    starts, ends = [], []
    if CUDA:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        x = to_device(next(it))
        if CUDA:
            starts.append(torch.cuda.Event(enable_timing=True))
            ends.append(torch.cuda.Event(enable_timing=True))
            starts[-1].record()
        work(x)
        if CUDA:
            ends[-1].record()
    if CUDA:
        torch.cuda.synchronize()
    wall_ms = (time.perf_counter() - t0) * 1e3 / steps
    out = {"wall_ms": wall_ms, "step_ms": wall_ms, "compute_ms": float("nan")}
    out.update(gpu_busy=float("nan"), h2d_ms=float("nan"))
    if CUDA:
        compute = [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]
        periods = [a.elapsed_time(b) for a, b in itertools.pairwise(starts)]
        span = starts[0].elapsed_time(ends[-1])
        out.update(
            step_ms=statistics.median(periods),
            compute_ms=statistics.median(compute),
            gpu_busy=sum(compute) / span,
            h2d_ms=_profile_h2d(it, to_device, work, profiled),
        )
    for _ in it:  # drain so DataLoader workers / prefetch threads finish cleanly
        pass
    return out


def _profile_h2d(it, to_device, work, steps: int) -> float:
    """Milliseconds of host→device memcpy per step, from the profiler's device events."""
    from torch.profiler import ProfilerActivity, profile

    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                work(to_device(next(it)))
            torch.cuda.synchronize()
        total_us = 0.0
        for evt in prof.key_averages():
            if "Memcpy HtoD" in evt.key:
                total_us += getattr(evt, "device_time_total", None) or evt.cuda_time_total
        return total_us / 1e3 / steps
    except Exception as exc:  # profiler quirks must not sink the whole benchmark
        print(f"  (profiler failed: {exc})", file=sys.stderr)
        return float("nan")


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
    return _images(batch).to(DEV, non_blocking=True)


def _already(batch):
    return _images(batch)


def variants(f32: list, u8: list, workers: int, steps: int) -> dict[str, tuple]:
    """name -> (make_iter(n), to_device, bytes per step, what it is)."""
    imgs_f32 = torch.cat([b[0] for b in f32])
    imgs_u8 = torch.cat([b[0] for b in u8])
    bsz = f32[0][0].shape[0]
    f32_bytes = f32[0][0].nbytes + f32[0][1].nbytes
    u8_bytes = u8[0][0].nbytes + u8[0][1].nbytes
    norm = Normalize(MEAN, STD, torch.bfloat16 if CUDA else torch.float32)

    def dl(images, n, pin):
        ds = ItemDataset(images, n * bsz)
        return torch.utils.data.DataLoader(
            ds, batch_size=bsz, num_workers=workers, pin_memory=pin and CUDA
        )

    out = {
        "a-pageable": (lambda n: cycle_batches(f32, n), _to_dev, f32_bytes, "pageable, non_blocking"),
        "b-dl-pinned": (lambda n: dl(imgs_f32, n, True), _to_dev, f32_bytes, f"DataLoader w={workers} pin"),
        "c-prefetch": (lambda n: prefetch(cycle_batches(f32, n), DEV), _already, f32_bytes, "membound prefetch"),
        "c-prefetch-dl": (lambda n: prefetch(dl(imgs_f32, n, False), DEV), _already, f32_bytes, f"prefetch(DataLoader w={workers})"),
        "d-prefetch-u8": (lambda n: prefetch(cycle_batches(u8, n), DEV, transform=norm), _already, u8_bytes, "prefetch uint8 + Normalize"),
    }  # fmt: skip
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
    p.add_argument("--csv", type=Path, default=RESULTS_DIR / "input_pipeline.csv")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--target-ms", type=float, default=2.5, help="GPU compute per step")
    p.add_argument("--only", default="", help="comma-separated variant names")
    args = p.parse_args(argv)

    quick = args.quick or not CUDA
    bsz, size = (8, 64) if quick else (64, 224)
    steps = args.steps or (6 if quick else 30)
    workers = min(args.workers, 2) if quick else args.workers
    n_distinct = 3 if quick else 6
    g = torch.Generator().manual_seed(0)
    f32 = [
        (torch.rand(bsz, 3, size, size, generator=g), torch.randint(0, 1000, (bsz,), generator=g))
        for _ in range(n_distinct)
    ]
    u8 = [((x * 255).to(torch.uint8), y) for x, y in f32]
    batch_bytes = f32[0][0].nbytes
    work = Workload(args.target_ms, 3, 256 if quick else 4096)
    resident = f32[0][0].to(DEV)
    compute_alone = bench_ms(lambda: work(resident))
    pinned_bps, pageable_bps = pinned_ceiling(batch_bytes)
    print(
        f"device {torch.cuda.get_device_name() if CUDA else 'cpu'}; batch {bsz}x3x{size}x{size} "
        f"= {batch_bytes / 1e6:.1f} MB fp32; compute alone {compute_alone:.2f} ms/step; "
        f"H2D pinned {pinned_bps / 1e9:.1f} GB/s, pageable {pageable_bps / 1e9:.1f} GB/s"
    )
    rows = CsvRows(args.csv)
    table = []

    def record(case, name, what, nbytes, res, loader_ms=float("nan")):
        h2d_gbps = nbytes / (res["h2d_ms"] / 1e3) / 1e9 if res["h2d_ms"] > 0 else float("nan")
        copy_pinned_ms = nbytes / pinned_bps * 1e3
        row = rows.add(
            case=case,
            variant=name,
            what=what,
            bytes_per_step=nbytes,
            flops_per_step=work.flops(f32[0][0]),
            step_ms=round(res["step_ms"], 4),
            wall_ms=round(res["wall_ms"], 4),
            compute_ms=round(res["compute_ms"], 4),
            compute_alone_ms=round(compute_alone, 4),
            gpu_busy=round(res["gpu_busy"], 4),
            h2d_ms_per_step=round(res["h2d_ms"], 4),
            h2d_gbps=round(h2d_gbps, 3),
            pinned_ceiling_gbps=round(pinned_bps / 1e9, 3),
            pageable_gbps=round(pageable_bps / 1e9, 3),
            h2d_fraction_of_pinned=round(h2d_gbps * 1e9 / pinned_bps, 4),
            predicted_overlapped_ms=round(max(compute_alone, copy_pinned_ms), 4),
            loader_ms_per_batch=round(loader_ms, 3),
            steps=steps,
        )
        table.append(row)
        print(
            f"  {case:7s} {name:14s} step {res['step_ms']:7.2f} ms  busy {res['gpu_busy']:6.1%}  "
            f"H2D {row['h2d_gbps']:6.1f} GB/s  {nbytes / 1e6:5.1f} MB/step",
            flush=True,
        )

    only = set(filter(None, args.only.split(",")))
    for name, (make, to_dev, nbytes, what) in variants(f32, u8, workers, steps).items():
        if only and name not in only:
            continue
        try:
            record("fed", name, what, nbytes, run_variant(make, to_dev, work, steps))
        except Exception as exc:
            print(f"  {name}: FAILED {type(exc).__name__}: {exc}", file=sys.stderr)

    # Case 2: the loader itself is slower than the GPU (per-item CPU work).
    if not only or "starved" in only:
        starved(f32, work, bsz, steps, record, compute_alone)
    print_table(table)
    print(f"rows appended to {args.csv}")
    return 0


def starved(f32, work, bsz, steps, record, compute_ms: float) -> None:
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

    t0 = time.perf_counter()
    next(iter(loader(1)))
    loader_ms = (time.perf_counter() - t0) * 1e3
    nbytes = f32[0][0].nbytes + f32[0][1].nbytes
    for name, make, to_dev in (
        ("a-pageable", loader, _to_dev),
        ("c-prefetch", lambda k: prefetch(loader(k), DEV), _already),
    ):
        try:
            res = run_variant(make, to_dev, work, n)
            record("starved", name, f"per-item CPU transform x{rounds}", nbytes, res, loader_ms)
        except Exception as exc:
            print(f"  starved {name}: FAILED {type(exc).__name__}: {exc}", file=sys.stderr)


def print_table(rows: list[dict]) -> None:
    print()
    head = f"{'case':8s}{'variant':15s}{'step ms':>9s}{'busy':>7s}{'H2D GB/s':>10s}{'of pinned':>10s}{'MB/step':>9s}{'loader ms':>10s}"
    print(head)
    print("-" * len(head))
    for r in rows:
        busy = r["gpu_busy"]
        print(
            f"{r['case']:8s}{r['variant']:15s}{r['step_ms']:9.2f}"
            f"{busy:7.0%}{r['h2d_gbps']:10.1f}{r['h2d_fraction_of_pinned']:10.0%}"
            f"{r['bytes_per_step'] / 1e6:9.1f}{r['loader_ms_per_batch']:10.1f}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
