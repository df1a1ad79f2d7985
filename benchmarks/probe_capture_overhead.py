"""Why does the GPU-only timeline pass slow the fp32 ResNet-50 by a quarter (issue 15)?

On the H200 (2026-12-01, `benchmarks/gpu/truth.sh resnet50_fp32`) membound's timeline pass
(GPU activity and runtime calls only) made `examples/real/resnet50_fp32.py` 62.9 -> 78.4 ms
per step, while the same pass added 1-13% elsewhere (`benchmarks/results/capture.csv`). In
the trace the main thread falls silent for 10-15 ms once per step, at a different place each
step, while the DataLoader's pin-memory thread is active (its cudaPointerGetAttributes
calls start each silence). This probe tests that hypothesis by intervention: the same
ResNet-50 step, timed without and with `torch.profiler` (CUDA activity only), for inputs fed

- `pin`: a DataLoader with workers and `pin_memory=True` (the script's own loader);
- `nopin`: the same loader with `pin_memory=False` (pageable batches, copied by the step);
- `gpu`: no loader, one batch already on the GPU;
- `pin-gc-off`: `pin` with Python's garbage collector disabled during the windows;
- `pin-membound`: `pin`, profiled by membound's own capture (`trace.capture.Capture`: the
  timeline pass with its step and DataLoader hooks) instead of a bare `torch.profiler`.

Each window is `--steps` steps synchronized only at its two ends (the loop's own
`loss.item()` each step is kept); the unprofiled window is timed before and after the
profiled one (drift check). One JSON line per variant.

    PYTHONPATH=src python benchmarks/probe_capture_overhead.py [--steps 15] [--only pin,gpu]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time

import torch
import torch.nn as nn

VARIANTS = ("pin", "nopin", "gpu", "pin-gc-off", "pin-membound")


class Images(torch.utils.data.Dataset):
    """uint8 pictures from a small pool, made fp32 and normalized per item on the CPU (what
    resnet50_fp32.py's transform does)."""

    def __init__(self, n: int, size: int = 224, pool: int = 64):
        g = torch.Generator().manual_seed(0)
        self.images = torch.randint(0, 256, (pool, 3, size, size), dtype=torch.uint8, generator=g)
        self.n = n
        self.mean = torch.tensor((0.485, 0.456, 0.406)).view(3, 1, 1)
        self.std = torch.tensor((0.229, 0.224, 0.225)).view(3, 1, 1)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        x = self.images[i % len(self.images)].float().div_(255)
        return (x - self.mean) / self.std, i % 1000


def batches(variant: str, batch: int, steps: int, workers: int):
    if variant == "gpu":
        x = torch.randn(batch, 3, 224, 224, device="cuda")
        y = torch.randint(0, 1000, (batch,), device="cuda")
        while True:
            yield x, y
    loader = torch.utils.data.DataLoader(
        Images(batch * (steps + 2)),
        batch_size=batch,
        shuffle=True,
        num_workers=workers,
        pin_memory=variant != "nopin",
        drop_last=True,
    )
    while True:
        for x, y in loader:
            yield x.to("cuda", non_blocking=True), y.to("cuda", non_blocking=True)


def run(variant: str, steps: int, batch: int, workers: int) -> dict:
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50(num_classes=1000).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    it = batches(variant, batch, 4 * steps + 10, workers)

    def step():
        x, y = next(it)
        loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    def window() -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / steps * 1e3

    for _ in range(5):  # warm-up: cuDNN's algorithm choice, the loader's workers
        step()
    gc_off = variant.endswith("gc-off")
    if gc_off:
        gc.disable()
    before = window()
    from torch.profiler import ProfilerActivity, profile

    if variant.endswith("membound"):
        import tempfile

        from membound.trace.capture import Capture

        # more steps scheduled than run: the trace is written on leaving, after the window
        with tempfile.TemporaryDirectory() as out:
            with Capture(steps=steps + 4, wait=0, warmup=0, ops_steps=1, out=out):
                for _ in range(2):
                    step()
                profiled = window()
    else:
        with profile(activities=[ProfilerActivity.CUDA]):
            for _ in range(2):
                step()
            profiled = window()
    after = window()
    if gc_off:
        gc.enable()
    base = (before + after) / 2
    return {
        "variant": variant,
        "steps": steps,
        "unprofiled_ms": round(before, 3),
        "unprofiled_again_ms": round(after, 3),
        "profiled_ms": round(profiled, 3),
        "overhead": round(profiled / base - 1, 4),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=15)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--only", default=",".join(VARIANTS))
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("probe_capture_overhead: needs a CUDA device", file=sys.stderr)
        return 2
    for v in args.only.split(","):
        if v not in VARIANTS:
            print(f"probe_capture_overhead: unknown variant {v!r}", file=sys.stderr)
            return 2
        print(json.dumps(run(v, args.steps, args.batch, args.workers)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
