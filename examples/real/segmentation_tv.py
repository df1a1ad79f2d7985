"""DeepLabV3-ResNet50 trained the way torchvision's segmentation reference (train.py) runs it.

`torchvision.models.segmentation.deeplabv3_resnet50(weights=None, weights_backbone=None,
num_classes=21, aux_loss=True)`, SGD with momentum and poly LR, `--amp` (fp16 autocast with a
GradScaler), batch 8 of 3 x 480 x 480 random crops with their int64 masks. The loader is the
reference's: a DataLoader with 8 workers whose transforms crop, flip, convert and normalize
on the CPU (fp32 images and int64 masks cross PCIe), its own `collate_fn`, no `pin_memory`,
batches moved with `.to(device)`; the metric logger reads `loss.item()` every step. The
criterion is the reference's: cross-entropy on `out` plus 0.5 x on `aux`, `ignore_index=255`.
Images are a fixed pool of random uint8 pictures with random masks.

Fixes, one flag each:
  --pin-memory          DataLoader(pin_memory=True)
  --membound-prefetch   membound.data.prefetch(loader): pinned batches on a side stream
  --channels-last       model and images in channels_last
  --bf16                bf16 autocast, no GradScaler (instead of fp16 + scaler)
  --compile             torch.compile(model)
  --fused-optimizer     SGD(fused=True): one kernel for the update, which also takes the
                        GradScaler's inf check on the GPU (no .item() in scaler.step)
  --log-every N         read the loss every N steps (the reference's print_freq), not every step

    python examples/real/segmentation_tv.py --steps 15
    membound diagnose -- python examples/real/segmentation_tv.py
"""

from __future__ import annotations

import torch
import torch.nn as nn
from _common import StepTimer, add_prefetch_options, parse, parser, pick, prefetch_kwargs, require

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class SyntheticSegmentation(torch.utils.data.Dataset):
    """`n` items from a pool of random uint8 images (and masks) of `base` pixels, randomly
    cropped to `crop`, flipped, made fp32 and normalized on access (the reference's
    RandomCrop, RandomHorizontalFlip, PILToTensor, ToDtype, Normalize)."""

    def __init__(self, n: int, base: int, crop: int, num_classes: int, pool: int = 16):
        g = torch.Generator().manual_seed(0)
        self.images = torch.randint(0, 256, (pool, 3, base, base), dtype=torch.uint8, generator=g)
        self.masks = torch.randint(
            0, num_classes, (pool, base, base), dtype=torch.uint8, generator=g
        )
        self.masks[:, :4] = 255  # some ignored border, as VOC's
        self.mean = torch.tensor(MEAN).view(3, 1, 1)
        self.std = torch.tensor(STD).view(3, 1, 1)
        self.n, self.base, self.crop = n, base, crop

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        k = i % len(self.images)
        top, left = (int(v) for v in torch.randint(0, self.base - self.crop + 1, (2,)))
        img = self.images[k, :, top : top + self.crop, left : left + self.crop]
        mask = self.masks[k, top : top + self.crop, left : left + self.crop]
        if torch.rand(()) < 0.5:
            img, mask = img.flip(-1), mask.flip(-1)
        x = (img.float() / 255.0 - self.mean) / self.std
        return x, mask.to(torch.int64)


def collate_fn(batch):
    """The reference's utils.collate_fn: images and targets each stacked (cat_list)."""
    images, targets = zip(*batch, strict=True)
    return torch.stack(images), torch.stack(targets)


def criterion(inputs: dict, target: torch.Tensor) -> torch.Tensor:
    losses = {name: nn.functional.cross_entropy(x, target, ignore_index=255)
              for name, x in inputs.items()}  # fmt: skip
    if len(losses) == 1:
        return losses["out"]
    return losses["out"] + 0.5 * losses["aux"]


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__, steps=15, warmup=5)
    p.add_argument("--batch-size", type=int, default=None, help="batch size (default 8)")
    p.add_argument("--workers", type=int, default=None, help="DataLoader workers (default 8)")
    p.add_argument("--pin-memory", action="store_true", help="DataLoader(pin_memory=True)")
    p.add_argument(
        "--membound-prefetch", action="store_true", help="membound.data.prefetch(loader)"
    )
    add_prefetch_options(p)
    p.add_argument("--channels-last", action="store_true", help="channels_last model and images")
    p.add_argument("--bf16", action="store_true", help="bf16 autocast instead of fp16 + scaler")
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
    tv = require("torchvision", "segmentation_tv.py")
    from torchvision.models.segmentation import deeplabv3_resnet50

    batch = args.batch_size or pick(args, 8, 2)
    crop, base = pick(args, (480, 520), (64, 72))
    workers = args.workers if args.workers is not None else pick(args, 8, 0)
    model = deeplabv3_resnet50(weights=None, weights_backbone=None, num_classes=21, aux_loss=True)
    model = model.to(args.device)
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    timer = StepTimer("segmentation_tv", args)
    timer.extra = {"batch": batch, "crop": crop, "workers": workers, "torchvision": tv.__version__}
    if args.compile:
        model = torch.compile(model)

    dataset = SyntheticSegmentation(batch * (timer.total_steps + 2), base, crop, 21)
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=batch,
        sampler=torch.utils.data.RandomSampler(dataset),
        num_workers=workers,
        collate_fn=collate_fn,
        drop_last=True,
        pin_memory=args.pin_memory,
    )
    if args.membound_prefetch:
        import membound.data

        loader = membound.data.prefetch(loader, args.device, **prefetch_kwargs(args))
    params = [
        {"params": [q for q in model.backbone.parameters() if q.requires_grad]},
        {"params": [q for q in model.classifier.parameters() if q.requires_grad]},
        {"params": [q for q in model.aux_classifier.parameters() if q.requires_grad], "lr": 0.2},
    ]  # the reference's groups (torch.compile's module passes attributes through)
    optimizer = torch.optim.SGD(
        params,
        lr=0.02,
        momentum=0.9,
        weight_decay=1e-4,
        fused=True if args.fused_optimizer else None,
    )
    total = timer.total_steps
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda x: (1 - x / total) ** 0.9)
    half = torch.bfloat16 if args.bf16 else torch.float16
    use_scaler = args.cuda and not args.bf16
    scaler = torch.amp.GradScaler("cuda") if use_scaler else None
    amp = torch.autocast(device_type="cuda" if args.cuda else "cpu", dtype=half)

    model.train()
    i = 0
    while not timer.done:
        for image, target in loader:
            image = image.to(args.device, memory_format=fmt)
            target = target.to(args.device)
            with amp:
                output = model(image)
                loss = criterion(output, target)
            optimizer.zero_grad()
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            else:
                loss.backward()
                optimizer.step()
            scheduler.step()
            if i % args.log_every == 0:
                loss_value = loss.item()  # metric_logger.update(loss=loss.item(), ...)
                if i % 10 == 0:
                    print(f"step {i}: loss {loss_value:.4f}", flush=True)
            i += 1
            timer.step()
            if timer.done:
                break
    return timer.report()


if __name__ == "__main__":
    main()
