"""The memory wall between host and GPU, measured: one small training loop fed four ways, each
captured with `membound.profile` and analysed.

(a) pageable tensors + `.to(cuda, non_blocking=True)`: the copy is silently synchronous;
(b) pinned tensors + non_blocking: asynchronous, but on the compute stream, so the GPU still
    waits for each copy; (c) `membound.data.prefetch`: the next batch is copied on a side
    stream while this one computes; (d) the same with uint8 batches and `Normalize` on the
    GPU: a quarter of the bytes over PCIe.
"""

from __future__ import annotations

from pathlib import Path

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
VARIANTS = {
    "a-pageable": "pageable tensors, .to(cuda, non_blocking=True)",
    "b-pinned": "pinned tensors, .to(cuda, non_blocking=True)",
    "c-prefetch": "membound.data.prefetch (pinned pool, side stream)",
    "d-prefetch-u8": "prefetch of uint8 batches + membound.data.Normalize on the GPU",
}
TARGET_COMPUTE_MS = 2.5
#: capture schedule: steps skipped, warm-up steps, recorded steps
WAIT, WARMUP, STEPS = 1, 2, 6


class Model:
    """A conv stem reading the whole batch, then a calibrated stack of bf16 matmuls: a training
    step (forward, backward, SGD) of about `TARGET_COMPUTE_MS` on the GPU."""

    def __init__(self, channels: int = 3, width: int = 2048, device: str = "cuda"):
        import torch

        g = torch.Generator().manual_seed(0)
        self.device = device
        self.stem = torch.nn.Conv2d(channels, 32, 4, stride=4).to(device)
        self.h0 = torch.randn(width, width, generator=g).to(device)
        self.layers = torch.nn.ModuleList(
            [torch.nn.Linear(width, width, bias=False) for _ in range(16)]
        ).to(device)
        self.depth = 1
        self.opt = torch.optim.SGD([*self.stem.parameters(), *self.layers.parameters()], lr=1e-6)

    def step(self, x) -> None:
        import torch

        with torch.autocast(self.device, dtype=torch.bfloat16):
            y = self.stem(x)
            h = self.h0 + y.mean()  # the batch gates the rest: compute waits for the copy
            for layer in self.layers[: self.depth]:
                h = layer(h)
            loss = h.float().square().mean()
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    def calibrate(self, x) -> float:
        """Pick the depth whose step takes about TARGET_COMPUTE_MS; return that step's ms."""
        from membound.device.timing import cuda_median_ms, wall_median_ms

        def ms():
            if self.device == "cuda":
                return cuda_median_ms(lambda: self.step(x), warmup_ms=10, rep_ms=40)
            return wall_median_ms(lambda: self.step(x), rep_ms=10, max_reps=3)

        self.depth = 1
        one = ms()
        self.depth = 9
        nine = ms()
        per = max((nine - one) / 8, 1e-3)
        self.depth = max(1, min(len(self.layers), round(1 + (TARGET_COMPUTE_MS - one) / per)))
        return ms()


def _cycle(batches, n):
    for i in range(n):
        yield batches[i % len(batches)]


def _feeds(batch: int, size: int, n: int, dev: str = "cuda"):
    """variant -> (iterator of n batches, to_device)."""
    import torch

    from membound.data import Normalize, prefetch

    g = torch.Generator().manual_seed(0)
    f32 = [torch.rand(batch, 3, size, size, generator=g) for _ in range(3)]
    u8 = [(t * 255).to(torch.uint8) for t in f32]
    pinned = [t.pin_memory() for t in f32] if dev == "cuda" else f32

    def to_dev(x):
        return x.to(dev, non_blocking=True)

    def already(x):
        return x

    norm = Normalize(MEAN, STD, dtype=torch.bfloat16 if dev == "cuda" else torch.float32)
    return {
        "a-pageable": (lambda: _cycle(f32, n), to_dev, f32[0].nbytes),
        "b-pinned": (lambda: _cycle(pinned, n), to_dev, f32[0].nbytes),
        "c-prefetch": (lambda: prefetch(_cycle(f32, n), dev), already, f32[0].nbytes),
        "d-prefetch-u8": (
            lambda: prefetch(_cycle(u8, n), dev, transform=norm),
            already,
            u8[0].nbytes,
        ),
    }


def run(
    out: Path, console, *, quick: bool = False, device: str = "cuda", shape=None, width=2048
) -> dict:
    """Run the four variants under `membound.profile`, analyse, present, compare.

    The demo runs on "cuda"; `device="cpu"` with a small `shape` (batch, image size) and
    `width` exercises the same code path in tests (CPU traces: no GPU findings)."""
    import torch

    import membound
    from membound.demos.show import present_variants
    from membound.device import get_ceilings

    batch, size = shape or ((32 if quick else 64), 224)
    ceilings = get_ceilings(device, quick=quick or device == "cpu", progress=False)
    model = Model(width=width, device=device)
    compute_ms = model.calibrate(torch.rand(batch, 3, size, size, device=device))
    n = WAIT + WARMUP + STEPS + 2
    feeds = _feeds(batch, size, n, device)
    console.print(
        f"[bold]input pipeline on {ceilings.name}[/bold]: a training step of {compute_ms:.2f} ms "
        f"GPU compute, fed {batch}x3x{size}x{size} fp32 batches "
        f"({feeds['a-pageable'][2] / 1e6:.1f} MB; uint8: {feeds['d-prefetch-u8'][2] / 1e6:.1f} MB);"
        f" each variant captured with membound.profile(steps={STEPS})"
    )
    rows = []
    for name, (make, to_device, _) in feeds.items():
        try:
            with membound.profile(steps=STEPS, wait=WAIT, warmup=WARMUP, out=out / name) as p:
                for b in make():
                    model.step(to_device(b))
            if device == "cuda":
                torch.cuda.synchronize()
            rows.append((name, VARIANTS[name], p.analyze(ceilings)))
        except Exception as exc:  # one failing variant must not cost the others
            console.print(f"[yellow]{name}: failed: {type(exc).__name__}: {exc}[/yellow]")
    if len(rows) < 2:
        return {"rows": rows}
    # pinning removes pageable-copy; prefetching then removes blocking-copy; uint8 the bytes
    res = present_variants(
        rows,
        out,
        console,
        title=f"input pipeline on {ceilings.name} (median step)",
        pairs=[
            ("a-pageable", "b-pinned"),
            ("b-pinned", "c-prefetch"),
            ("a-pageable", "d-prefetch-u8"),
        ],
    )
    res["rows"] = rows
    res["compute_ms"] = compute_ms
    return res
