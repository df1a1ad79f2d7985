"""The memory wall between host and GPU, measured: one GPU workload fed four ways, each timed
without the profiler and then captured with `membound.profile` and analysed.

(a) pageable batches + `.to(cuda, non_blocking=True)`: the copy is silently synchronous;
(b) DataLoader(pin_memory=True) + non_blocking — what users do to pin: the copy becomes fast
    and asynchronous, but the loader's single pin thread copies 38.5 MB per batch;
(c) `membound.data.prefetch` over the same pageable batches as (a): staged into pinned buffers
    by several threads and copied on a side stream while the previous batch computes;
(d) the same with uint8 batches and `Normalize` on the GPU: a quarter of the bytes.

The workload, the batches and the variants are defined here once and imported by
`benchmarks/bench_input_pipeline.py`, so the demo's table and the benchmark's agree.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
#: the demo's variants (the benchmark adds more): name -> what fed the loop
VARIANTS = {
    "a-pageable": "pageable tensors, .to(cuda, non_blocking=True)",
    "b-dl-pinned": "DataLoader(pin_memory=True, 4 workers), .to(cuda, non_blocking=True)",
    "c-prefetch": "membound.data.prefetch over (a)'s pageable batches (pinned pool, side stream)",
    "d-prefetch-u8": "prefetch of uint8 batches + membound.data.Normalize on the GPU",
}
TARGET_COMPUTE_MS = 2.5
WORKERS = 4
#: capture schedule: steps skipped, warm-up steps, recorded steps
WAIT, WARMUP, STEPS = 1, 2, 6
#: steps timed without the profiler (after `WARMUP_STEPS` untimed ones)
TIMED_STEPS, WARMUP_STEPS = 20, 4
#: extra batches past the used ones (> any prefetch depth + staging in flight), so a
#: prefetching pipeline stays full to the end
PIPELINE_SLACK = 8


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


def make_batches(batch: int, size: int, distinct: int) -> tuple[list, list]:
    """(float32 batches, uint8 batches): `distinct` pageable (images, labels) pairs each."""
    g = torch.Generator().manual_seed(0)
    f32 = [
        (
            torch.rand(batch, 3, size, size, generator=g),
            torch.randint(0, 1000, (batch,), generator=g),
        )
        for _ in range(distinct)
    ]
    u8 = [((x * 255).to(torch.uint8), y) for x, y in f32]
    return f32, u8


# -- the GPU workload -------------------------------------------------------------------


class Workload:
    """A conv stem reading the batch, then a chain of bf16 matmuls: ~target_ms of GPU work.

    Few, large kernels (about 20 launches per step): the host stays far ahead of the GPU even
    under the profiler, so what the variants change — the copy path — is what is measured.
    (A small autograd + optimizer step launches ~100 kernels of ~25 µs: under the profiler
    its host time reaches the GPU time and any host-side cost reads as `launch-bound`.)
    """

    def __init__(self, target_ms: float, channels: int, size: int, device: str | torch.device):
        self.device = torch.device(device)
        cuda = self.device.type == "cuda"
        dt = torch.bfloat16 if cuda else torch.float32
        g = torch.Generator(device="cpu").manual_seed(0)
        self.dtype, self.size = dt, size
        self.conv = (torch.randn(32, channels, 3, 3, generator=g) * 0.1).to(self.device, dt)
        self.w = (torch.randn(size, size, generator=g) / size**0.5).to(self.device, dt)
        self.z0 = torch.randn(size, size, generator=g).to(self.device, dt)
        x = torch.rand(2, channels, 32, 32, device=self.device)
        self.repeats = 1
        one = self.time_ms(x)
        self.repeats = 11
        eleven = self.time_ms(x)
        per_mm = max((eleven - one) / 10, 1e-3)
        self.repeats = max(1, round((target_ms - (one - per_mm)) / per_mm))

    def time_ms(self, x: torch.Tensor) -> float:
        """Median ms of one step on `x` (device time on CUDA, wall time on CPU)."""
        from membound.device.timing import cuda_median_ms, wall_median_ms

        if self.device.type == "cuda":
            return cuda_median_ms(lambda: self(x), warmup_ms=10, rep_ms=50)
        return wall_median_ms(lambda: self(x), rep_ms=10, max_reps=3)

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


# -- the variants ------------------------------------------------------------------------


def images(batch):
    return batch[0] if isinstance(batch, (tuple, list)) else batch


def variants(f32: list, u8: list, workers: int, device: str | torch.device) -> dict[str, tuple]:
    """name -> (make_iter(n batches), to_device(batch) -> images, bytes per step, what it is).

    The demo runs `VARIANTS`; the benchmark all of these (plus timm's loader if present)."""
    from membound.data import Normalize, prefetch

    dev = torch.device(device)
    cuda = dev.type == "cuda"
    imgs_f32 = torch.cat([b[0] for b in f32])
    bsz = f32[0][0].shape[0]
    f32_bytes = f32[0][0].nbytes + f32[0][1].nbytes
    u8_bytes = u8[0][0].nbytes + u8[0][1].nbytes
    norm = Normalize(MEAN, STD, torch.bfloat16 if cuda else torch.float32)

    def to_dev(batch):
        return images(batch).to(dev, non_blocking=True)

    def already(batch):
        return images(batch)

    def dl(imgs, n, pin):
        ds = ItemDataset(imgs, n * bsz)
        return torch.utils.data.DataLoader(
            ds, batch_size=bsz, num_workers=workers, pin_memory=pin and cuda
        )

    return {
        "a-pageable": (lambda n: cycle_batches(f32, n), to_dev, f32_bytes, "pageable, non_blocking"),
        "b-dl-pinned": (lambda n: dl(imgs_f32, n, True), to_dev, f32_bytes, f"DataLoader w={workers} pin"),
        "c-prefetch": (lambda n: prefetch(cycle_batches(f32, n), dev), already, f32_bytes, "membound prefetch"),
        "c-prefetch-dl": (lambda n: prefetch(dl(imgs_f32, n, False), dev), already, f32_bytes, f"prefetch(DataLoader w={workers})"),
        "d-prefetch-u8": (lambda n: prefetch(cycle_batches(u8, n), dev, transform=norm), already, u8_bytes, "prefetch uint8 + Normalize"),
    }  # fmt: skip


def time_steps(it: Iterator, to_device: Callable, work: Workload, steps: int) -> dict:
    """Run `steps` steps from `it`, without the profiler; the caller warmed up.

    step_ms = host wall time over the steps (ending in a synchronize) ÷ steps: what a user
    waits per step, stalls included. gpu_busy = the compute's kernel time (CUDA events around
    it) ÷ that same wall time, so gpu_busy ≈ compute_ms / step_ms. median_period_ms: median
    GPU start-to-start interval (far below step_ms: bursty delivery)."""
    cuda = work.device.type == "cuda"
    starts, ends = [], []
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        x = to_device(next(it))
        if cuda:
            starts.append(torch.cuda.Event(enable_timing=True))
            ends.append(torch.cuda.Event(enable_timing=True))
            starts[-1].record()
        work(x)
        if cuda:
            ends[-1].record()
    if cuda:
        torch.cuda.synchronize()
    wall_ms = (time.perf_counter() - t0) * 1e3
    nan = float("nan")
    out = {"step_ms": wall_ms / steps, "compute_ms": nan, "gpu_busy": nan, "median_period_ms": nan}
    if cuda:
        compute = [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]
        periods = [a.elapsed_time(b) for a, b in itertools.pairwise(starts)]
        out.update(
            compute_ms=statistics.median(compute),
            gpu_busy=sum(compute) / wall_ms,
            median_period_ms=statistics.median(periods) if periods else nan,
        )
    return out


def _close(it) -> None:
    """Stop a loader early: a prefetcher's generator joins its threads on close(); a
    DataLoader iterator shuts its workers down when dropped."""
    close = getattr(it, "close", None)
    if callable(close):
        close()


# -- the demo -----------------------------------------------------------------------------


def run(
    out: Path,
    console,
    *,
    quick: bool = False,
    device: str = "cuda",
    shape=None,
    width: int = 4096,
    workers: int = WORKERS,
) -> dict:
    """Time each variant without the profiler, then capture it with `membound.profile`,
    analyse, present, compare.

    The demo runs on "cuda"; `device="cpu"` with a small `shape` (batch, image size), `width`
    (matmul size) and `workers=0` exercises the same code path in tests."""
    import membound
    from membound.demos.show import present_variants
    from membound.device import get_ceilings

    batch, size = shape or ((32 if quick else 64), 224)
    cuda = torch.device(device).type == "cuda"
    ceilings = get_ceilings(device, quick=quick or not cuda, progress=False)
    work = Workload(TARGET_COMPUTE_MS, 3, width, device)
    resident = torch.rand(batch, 3, size, size, device=device)
    compute_ms = work.time_ms(resident)
    f32, u8 = make_batches(batch, size, 3)
    feeds = variants(f32, u8, workers, device)
    timed_steps = TIMED_STEPS if cuda else 2
    console.print(
        f"[bold]input pipeline on {ceilings.name}[/bold]: a GPU step of {compute_ms:.2f} ms "
        f"(conv stem + {work.repeats} bf16 {width}x{width} matmuls), fed {batch}x3x{size}x{size} "
        f"fp32 batches ({feeds['a-pageable'][2] / 1e6:.1f} MB; uint8: "
        f"{feeds['d-prefetch-u8'][2] / 1e6:.1f} MB). Each variant: {timed_steps} steps timed "
        f"without the profiler, then {STEPS} steps captured with membound.profile."
    )
    rows, timed = [], {}
    profiled = WAIT + WARMUP + STEPS + 1
    for name, what in VARIANTS.items():
        what = what.replace(f"{WORKERS} workers", f"{workers} workers")
        make, to_device, _, _ = feeds[name]
        it = None
        try:
            it = iter(make(WARMUP_STEPS + timed_steps + profiled + PIPELINE_SLACK))
            for _ in range(WARMUP_STEPS):
                work(to_device(next(it)))
            timed[name] = time_steps(it, to_device, work, timed_steps)
            # the syncs spin: the loop runs exactly `profiled` steps, and sleep-profiled (the
            # default) would add its 3 steps to the wait on CUDA
            with membound.profile(
                steps=STEPS, wait=WAIT, warmup=WARMUP, out=out / name, sleeping_syncs="spin"
            ) as p:
                for _ in range(profiled):
                    work(to_device(next(it)))
                    membound.step()
            if cuda:
                torch.cuda.synchronize()
            rows.append((name, what, p.analyze(ceilings)))
        except Exception as exc:  # one failing variant must not cost the others
            console.print(f"[yellow]{name}: failed: {type(exc).__name__}: {exc}[/yellow]")
        finally:
            _close(it)
            del it
    if len(rows) < 2:
        return {"rows": rows, "timed": timed}
    # pinning removes pageable-copy; prefetching then the blocking copy and the pin thread;
    # uint8 a quarter of the bytes
    res = present_variants(
        rows,
        out,
        console,
        title=f"input pipeline on {ceilings.name}",
        pairs=[
            ("a-pageable", "b-dl-pinned"),
            ("b-dl-pinned", "c-prefetch"),
            ("a-pageable", "d-prefetch-u8"),
        ],
        timed=timed,
    )
    res["story"] = story(rows, console)
    import json

    # the unprofiled timings beside the report JSONs, for scripts comparing with the benchmark
    (out / "timed.json").write_text(json.dumps({"compute_alone_ms": compute_ms, **timed}, indent=1))
    res["rows"] = rows
    res["timed"] = timed
    res["compute_ms"] = compute_ms
    return res


#: the findings the story is about, in the order the fixes remove them
STORY_CODES = ("pageable-copy", "blocking-copy", "input-starved", "launch-bound")


def story(rows: list, console) -> dict[str, list[str]]:
    """Which variant produced which of the story's findings (code -> variant names)."""
    seen = {
        code: [name for name, _, a in rows if any(f.code == code for f in a.findings)]
        for code in STORY_CODES
    }
    console.print("\n[bold]the story, from the findings[/bold]:")
    for code, names in seen.items():
        console.print(f"  {code:14s} {', '.join(names) if names else 'in no variant'}")
    return seen
