"""torchvision ResNet-50 in fp32, trained the way torchvision's classification reference does.

ImageNet-size inputs (batch 128 of 3 x 224 x 224) from a DataLoader with 8 workers and
`pin_memory=True`; each item goes through torchvision transforms on the CPU (random flip,
uint8 -> float, normalize), so fp32 batches cross PCIe. The step: `.to(device)`, forward in
fp32, cross-entropy, SGD with momentum, and `loss.item()` every step for the metric logger.
Images are synthetic (a fixed pool of random uint8 pictures).

Fixes, one flag each:
  --amp             bf16 autocast (16-bit activations: half the bytes, tensor-core math)
  --channels-last   model and inputs in channels_last (NHWC) memory format
  --compile         torch.compile(model) (what the torchvision reference offers as --compile)
  --fused-optimizer SGD(fused=True): one kernel for the update
  --tf32            allow TF32 for fp32 matmuls and convolutions
  --log-every N     read the loss (.item(), a sync) every N steps, not every step

    python examples/real/resnet50_fp32.py --steps 15
    membound diagnose -- python examples/real/resnet50_fp32.py
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
import torch.nn as nn
from _common import StepTimer, parse, parser, pick, require

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class SyntheticImageNet(torch.utils.data.Dataset):
    """`n` items drawn from a pool of random uint8 CHW images, transformed on access (what
    an ImageFolder with a transform does after decoding, minus the JPEG decode)."""

    def __init__(self, n: int, size: int, num_classes: int, transform, pool: int = 64):
        g = torch.Generator().manual_seed(0)
        self.images = torch.randint(0, 256, (pool, 3, size, size), dtype=torch.uint8, generator=g)
        self.labels = torch.randint(0, num_classes, (n,), generator=g)
        self.n, self.transform = n, transform

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        return self.transform(self.images[i % len(self.images)]), int(self.labels[i])


def train_transform():
    """The reference's train transform without the decode and the random-resized crop."""
    try:
        from torchvision.transforms import v2
    except ImportError:  # torchvision < 0.15
        v2 = None
    if v2 is not None:
        return v2.Compose(
            [
                v2.RandomHorizontalFlip(),
                v2.ToDtype(torch.float32, scale=True),
                v2.Normalize(MEAN, STD),
            ]
        )
    from torchvision import transforms

    return transforms.Compose(
        [
            transforms.RandomHorizontalFlip(),
            transforms.ConvertImageDtype(torch.float32),
            transforms.Normalize(MEAN, STD),
        ]
    )


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__, steps=15, warmup=5)
    p.add_argument("--batch-size", type=int, default=None, help="batch size (default 128)")
    p.add_argument("--workers", type=int, default=None, help="DataLoader workers (default 8)")
    p.add_argument("--amp", action="store_true", help="bf16 autocast")
    p.add_argument("--channels-last", action="store_true", help="channels_last memory format")
    p.add_argument("--tf32", action="store_true", help="allow TF32 matmuls and convolutions")
    p.add_argument("--compile", action="store_true", help="torch.compile(model)")
    p.add_argument("--fused-optimizer", action="store_true", help="SGD(fused=True)")
    p.add_argument(
        "--log-every",
        type=int,
        default=1,
        metavar="N",
        help="loss.item() every N steps (default 1)",
    )
    args = parse(p, argv)
    if args.log_every < 1:
        p.error("--log-every must be >= 1")
    torchvision = require("torchvision", "resnet50_fp32.py")

    if args.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    batch = args.batch_size or pick(args, 128, 2)
    size = pick(args, 224, 64)
    workers = args.workers if args.workers is not None else pick(args, 8, 0)
    steps_needed = args.warmup_steps + args.steps
    dataset = SyntheticImageNet(batch * (steps_needed + 1), size, 1000, train_transform())
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=batch,
        shuffle=True,
        num_workers=workers,
        pin_memory=args.cuda,
        drop_last=True,
        persistent_workers=False,
    )
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    model = torchvision.models.resnet50(num_classes=1000).to(
        args.device, memory_format=memory_format
    )
    criterion = nn.CrossEntropyLoss()
    if args.compile:
        model = torch.compile(model)
    optimizer = torch.optim.SGD(
        model.parameters(),
        lr=0.1,
        momentum=0.9,
        weight_decay=1e-4,
        fused=True if args.fused_optimizer else None,
    )
    autocast = (
        torch.autocast(device_type="cuda" if args.cuda else "cpu", dtype=torch.bfloat16)
        if args.amp
        else nullcontext()
    )

    timer = StepTimer("resnet50_fp32", args)
    timer.extra = {
        "batch": batch,
        "workers": workers,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
    }
    model.train()
    for i, (image, target) in enumerate(loader):
        image = image.to(args.device, memory_format=memory_format)
        target = target.to(args.device)
        with autocast:
            output = model(image)
            loss = criterion(output, target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if i % args.log_every == 0:
            loss_value = loss.item()  # the metric logger's sync
            if i % 10 == 0:
                print(f"step {i}: loss {loss_value:.4f}", flush=True)
        timer.step()
        if timer.done:
            break
    return timer.report()


if __name__ == "__main__":
    main()
