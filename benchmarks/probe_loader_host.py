"""What does a worker-fed batch cost the training thread, pageable against pinned (issue 15)?

On the H200 truth runs, pinning the batches of a DataLoader with workers saved more than
`pageable-copy` predicted: the Lightning fit 9.7-13.6 ms/step against 6.8-8.9 predicted, the
timm ViT 10.6-12.4 against 7.8, with the same 38.5 MB batch (64 x 3 x 224 x 224 fp32). The
prediction counts the copy's time beyond a pinned copy's. The hypothesis this tests: a batch
a worker made lives in shared memory, and the training thread pays for it twice more outside
any profiled call. The copy's first read of its pages faults them in, and dropping the batch
unmaps them. With `pin_memory=True` the loader's pin thread receives, reads and drops the
shared batch, and the training thread gets pinned memory.

One process, one loader per variant (8 workers by default, a pool of made images so that the
workers always keep up), each batch taken the way a training loop takes it:

    x, y = next(it)                               # t_next
    xg = x.to("cuda", non_blocking=True)           # t_copy
    del x, y                                       # t_release (the loop rebinding its names)
    GPU work of --gpu-ms (torch.cuda._sleep), loss.item()-like sync each step

Variants: `pageable` (pin_memory=False), `pinned` (pin_memory=True), and `local` (a
pageable batch the training thread made itself, no shared memory: the copy's and release's
floor). Per variant, one JSON line with the medians (ms) of t_next, t_copy, t_release, their
sum (`thread_ms`), and the step (`step_ms`: window / steps, synchronized at its ends).

    PYTHONPATH=src python benchmarks/probe_loader_host.py [--steps 40] [--gpu-ms 20]

With `--launches N --normalize` the step also launches N small kernels (the training thread's
host work) and the workers normalize each image (CPU work, as the ViT's do): the variants
`prefetch` and `prefetch-tN` (membound.data.prefetch with N copy threads) then show whether the
prefetcher's copy threads compete with them (on the H200 it trailed pin_memory by 2.5-3 ms a
step on Lightning and the ViT, 2026-12-04 calls 2 and 3).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time

import torch


class Normalized(torch.utils.data.Dataset):
    """`n` items made the way the timm ViT's loader makes them: a uint8 image from a pool,
    flipped, made fp32 and normalized per item (CPU work in the workers)."""

    def __init__(self, n: int, shape: tuple[int, ...], pool: int = 16):
        g = torch.Generator().manual_seed(0)
        self.images = torch.randint(0, 256, (pool, *shape), dtype=torch.uint8, generator=g)
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        img = self.images[i % len(self.images)]
        if i % 2:
            img = img.flip(-1)
        return (img.float() / 255.0 - 0.5) / 0.5, i % 1000


class Pool(torch.utils.data.Dataset):
    """`n` items, each a clone of one of `pool` made images of `shape` (fp32)."""

    def __init__(self, n: int, shape: tuple[int, ...], pool: int = 16):
        g = torch.Generator().manual_seed(0)
        self.images = torch.rand((pool, *shape), generator=g)
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        return self.images[i % len(self.images)].clone(), i % 1000


def run(variant: str, a) -> dict:
    # a variant's leftovers (the prefetcher's device tensors, with the events of the streams
    # that used them) must be gone before the next loader forks its workers: a forked worker
    # whose garbage collector frees one calls CUDA and dies (call 4's first attempt)
    gc.collect()
    torch.cuda.synchronize()
    shape = (3, a.size, a.size)
    n = a.batch * (a.steps + a.warmup + 4)
    cycles = int(a.gpu_ms * 1e-3 * torch.cuda.clock_rate() * 1e6) if a.gpu_ms > 0 else 0
    if variant == "local":
        host = torch.rand(a.batch, *shape)

        def batches():
            while True:
                yield host.clone(), torch.zeros(a.batch, dtype=torch.long)

        it = batches()
    else:
        data = Normalized(n, shape) if a.normalize else Pool(n, shape)
        loader = torch.utils.data.DataLoader(
            data,
            batch_size=a.batch,
            num_workers=a.workers,
            pin_memory=variant == "pinned",
            persistent_workers=False,
            drop_last=True,
        )
        if variant.startswith("prefetch"):
            import membound.data

            threads = int(variant.split("-t")[1]) if "-t" in variant else None
            loader = membound.data.prefetch(loader, "cuda", num_threads=threads)
        it = iter(loader)
    small = torch.zeros(1, device="cuda")
    nexts, copies, releases = [], [], []
    sink = torch.zeros((), device="cuda")
    start = 0.0
    for s in range(a.warmup + a.steps):
        if s == a.warmup:
            torch.cuda.synchronize()
            start = time.perf_counter()
        t0 = time.perf_counter()
        x, y = next(it)
        t1 = time.perf_counter()
        xg = x.to("cuda", non_blocking=True)
        yg = y.to("cuda", non_blocking=True)
        t2 = time.perf_counter()
        del x, y
        t3 = time.perf_counter()
        for _ in range(a.launches):  # the step's own host work: launching its kernels
            small.add_(1.0)
        if cycles:
            torch.cuda._sleep(cycles)
        sink += xg[0, 0, 0, 0] + yg[0]
        sink.item()  # the loop's loss.item()
        if s >= a.warmup:
            nexts.append((t1 - t0) * 1e3)
            copies.append((t2 - t1) * 1e3)
            releases.append((t3 - t2) * 1e3)
    torch.cuda.synchronize()
    step = (time.perf_counter() - start) * 1e3 / a.steps
    med = {k: statistics.median(v) for k, v in
           (("next_ms", nexts), ("copy_ms", copies), ("release_ms", releases))}  # fmt: skip
    return {
        "variant": variant,
        **{k: round(v, 3) for k, v in med.items()},
        "thread_ms": round(sum(med.values()), 3),
        "step_ms": round(step, 3),
        "batch_mb": round(a.batch * 4 * a.size * a.size * 3 / 1e6, 2),
        "workers": a.workers,
        "gpu_ms": a.gpu_ms,
        "launches": a.launches,
        "normalize": a.normalize,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=8)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--gpu-ms", type=float, default=20.0)
    p.add_argument("--launches", type=int, default=0, help="kernel launches a step (host work)")
    p.add_argument("--normalize", action="store_true", help="workers normalize each image")
    p.add_argument(
        "--variants",
        default="pageable,pinned,local,pageable,pinned",
        help="pageable, pinned, local, prefetch (membound.data.prefetch), prefetch-tN (N copy "
        "threads)",
    )
    a = p.parse_args()
    for v in a.variants.split(","):
        row = run(v, a)
        row.update(torch=torch.__version__, gpu=torch.cuda.get_device_name())
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
