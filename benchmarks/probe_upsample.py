"""How fast is bilinear upsampling's backward, and what makes it faster (issue 15/16)?

In torchvision's DeepLabV3-ResNet50 (`examples/real/segmentation_tv.py`, fp16 AMP, batch 8,
480 x 480 crops) `aten::upsample_bilinear2d_backward` took 16.4 ms of a 62 ms step on the
H200 (3 calls: the heads' 21-class logits, 60 x 60 -> 480 x 480, in fp32 under autocast), at
0.5% of the memory roof; `--channels-last` saved 11.3 ms/step. This times the op's forward +
backward at that shape, CUDA events around each, median of `--reps`, for: NCHW eager,
channels_last eager, and torch.compile of the interpolate (NCHW and channels_last). One JSON
line per variant with the forward+backward and the backward alone (ms).

    PYTHONPATH=src python benchmarks/probe_upsample.py [--reps 20]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
import torch.nn.functional as F


def timed(fn, reps: int) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b))
    return statistics.median(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--shape", default="8,21,60,60")
    p.add_argument("--size", type=int, default=480)
    a = p.parse_args()
    shape = tuple(int(v) for v in a.shape.split(","))
    size = (a.size, a.size)

    def up(x):
        return F.interpolate(x, size=size, mode="bilinear", align_corners=False)

    compiled = torch.compile(up)
    for name, fmt, fn in (
        ("nchw eager", torch.contiguous_format, up),
        ("channels_last eager", torch.channels_last, up),
        ("nchw compiled", torch.contiguous_format, compiled),
        ("channels_last compiled", torch.channels_last, compiled),
    ):
        row = variant(fn, shape, fmt, a.reps)
        row.update(variant=name, shape=list(shape), size=a.size, torch=torch.__version__)
        print(json.dumps(row), flush=True)


def variant(fn, shape, fmt, reps: int) -> dict:
    """Forward + backward and backward alone of `fn` on an input of `shape` in `fmt`."""
    x = torch.randn(shape, device="cuda").to(memory_format=fmt).requires_grad_()
    y = fn(x)
    g = torch.randn_like(y)

    def fwd_bwd():
        x.grad = None
        fn(x).backward(g)

    def bwd():
        x.grad = None
        y.backward(g, retain_graph=True)

    nhwc = g.is_contiguous(memory_format=torch.channels_last) and not g.is_contiguous()
    return {"fwd_bwd_ms": round(timed(fwd_bwd, reps), 3), "bwd_ms": round(timed(bwd, reps), 3),
            "grad_out_format": "channels_last" if nhwc else "nchw"}  # fmt: skip


if __name__ == "__main__":
    main()
