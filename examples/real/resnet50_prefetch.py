"""ResNet-50 trained the way timm's train.py trains it: AMP, uint8 batches, a CUDA prefetcher.

timm's resnet50 (torchvision's when timm is not installed), bf16 autocast, SGD with
momentum, label smoothing, `loss.item()` every step for the loss meter. The input pipeline
is timm's: the dataset yields uint8 CHW arrays, a fast collate stacks them into one uint8
tensor (4x fewer bytes than fp32), and a prefetch loader copies the next batch to the GPU on
a side stream and normalizes it there while the current batch trains. As with timm's
`--pin-mem`, the DataLoader does not pin by default: the copies come from pageable memory,
so `non_blocking=True` silently blocks the host for every copy. Images are synthetic.

Fixes, one flag each:
  --pin-mem            DataLoader(pin_memory=True): the copies become asynchronous
  --membound-prefetch  membound.data.prefetch(loader, transform=membound.data.Normalize(...))
                       in place of the prefetch loader (pinned staging on its own threads)
  --channels-last      model and inputs in channels_last memory format
  --compile            torch.compile(model) (timm's --torchcompile)
  --log-every N        read the loss (.item(), a sync) every N steps, not every step

    python examples/real/resnet50_prefetch.py --steps 20
    membound diagnose -- python examples/real/resnet50_prefetch.py
"""

from __future__ import annotations

import importlib.util
from contextlib import nullcontext

import numpy as np
import torch
import torch.nn as nn
from _common import StepTimer, parse, parser, pick, require

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class SyntheticImages(torch.utils.data.Dataset):
    """`n` items from a pool of random uint8 CHW images, as numpy arrays (what timm's
    ToNumpy transform hands the collate after decoding and augmentation)."""

    def __init__(self, n: int, size: int, num_classes: int, pool: int = 64):
        rng = np.random.default_rng(0)
        self.images = rng.integers(0, 256, size=(pool, 3, size, size), dtype=np.uint8)
        self.labels = rng.integers(0, num_classes, size=n)
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        img = self.images[i % len(self.images)]
        if i % 2:  # a random-flip stand-in: some per-item CPU work, as augmentation does
            img = img[:, :, ::-1]
        return img, int(self.labels[i])


def fast_collate(batch):
    """uint8 arrays -> one uint8 tensor (N, C, H, W) and int64 targets; no float on the host."""
    targets = torch.tensor([b[1] for b in batch], dtype=torch.int64)
    images = torch.empty((len(batch), *batch[0][0].shape), dtype=torch.uint8)
    for i, (img, _) in enumerate(batch):
        images[i].copy_(torch.from_numpy(np.ascontiguousarray(img)))
    return images, targets


class PrefetchLoader:
    """Wraps a loader of uint8 batches: the next batch is copied to the GPU on a side stream
    and normalized there while the current one trains (one batch of look-ahead)."""

    def __init__(self, loader, device, mean, std, img_dtype=torch.float32, channels_last=False):
        self.loader = loader
        self.device = torch.device(device)
        self.mean = torch.tensor([x * 255 for x in mean], device=device).view(1, 3, 1, 1)
        self.std = torch.tensor([x * 255 for x in std], device=device).view(1, 3, 1, 1)
        self.img_dtype = img_dtype
        self.channels_last = channels_last
        self.cuda = self.device.type == "cuda"

    def __iter__(self):
        stream = torch.cuda.Stream() if self.cuda else None
        first = True
        batch_input = batch_target = None
        for next_input, next_target in self.loader:
            with torch.cuda.stream(stream) if self.cuda else nullcontext():
                next_input = next_input.to(self.device, non_blocking=True)
                next_target = next_target.to(self.device, non_blocking=True)
                next_input = next_input.to(self.img_dtype).sub_(self.mean).div_(self.std)
                if self.channels_last:
                    next_input = next_input.contiguous(memory_format=torch.channels_last)
            if not first:
                yield batch_input, batch_target
            else:
                first = False
            if self.cuda:
                current = torch.cuda.current_stream()
                current.wait_stream(stream)
                # allocated on the side stream, used on this one: keep the allocator honest
                next_input.record_stream(current)
                next_target.record_stream(current)
            batch_input, batch_target = next_input, next_target
        if not first:
            yield batch_input, batch_target

    def __len__(self) -> int:
        return len(self.loader)


def create_model(num_classes: int):
    """timm's resnet50 when timm is installed, else torchvision's (the same architecture)."""
    if importlib.util.find_spec("timm") is not None:
        import timm

        return timm.create_model("resnet50", num_classes=num_classes), "timm"
    torchvision = require("torchvision", "resnet50_prefetch.py", "timm or torchvision")
    return torchvision.models.resnet50(num_classes=num_classes), "torchvision"


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__, steps=20, warmup=5)
    p.add_argument("--batch-size", type=int, default=None, help="batch size (default 256)")
    p.add_argument("--workers", type=int, default=None, help="DataLoader workers (default 8)")
    p.add_argument(
        "--pin-mem",
        "--pin",
        dest="pin_mem",
        action="store_true",
        help="pin the DataLoader's batches (timm's --pin-mem; off by default, as in timm)",
    )
    p.add_argument(
        "--membound-prefetch",
        action="store_true",
        help="membound.data.prefetch(loader, transform=Normalize(mean, std)) instead of the "
        "prefetch loader",
    )
    p.add_argument("--no-amp", action="store_true", help="train in fp32 (AMP is on by default)")
    p.add_argument("--channels-last", action="store_true", help="channels_last memory format")
    p.add_argument("--compile", action="store_true", help="torch.compile(model)")
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
    model, source = create_model(1000)
    amp = not args.no_amp
    batch = args.batch_size or pick(args, 256, 2)
    size = pick(args, 224, 32)
    workers = args.workers if args.workers is not None else pick(args, 8, 0)
    steps_needed = args.warmup_steps + args.steps
    dataset = SyntheticImages(batch * (steps_needed + 2), size, 1000)
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=batch,
        shuffle=True,
        num_workers=workers,
        collate_fn=fast_collate,
        pin_memory=args.pin_mem and args.cuda,
        drop_last=True,
    )
    img_dtype = torch.bfloat16 if amp and args.cuda else torch.float32
    if args.membound_prefetch:
        import membound.data

        normalize = membound.data.Normalize(
            IMAGENET_MEAN, IMAGENET_STD, dtype=img_dtype, channels_last=args.channels_last
        )
        loader = membound.data.prefetch(loader, args.device, transform=normalize)
    else:
        loader = PrefetchLoader(
            loader, args.device, IMAGENET_MEAN, IMAGENET_STD, torch.float32, args.channels_last
        )
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    model = model.to(args.device)
    if args.compile:
        model = torch.compile(model)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    optimizer = torch.optim.SGD(
        model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=2e-5
    )
    autocast = (
        torch.autocast(device_type="cuda", dtype=torch.bfloat16)
        if amp and args.cuda
        else nullcontext()
    )

    timer = StepTimer("resnet50_prefetch", args)
    timer.extra = {"model": source, "batch": batch, "workers": workers}
    model.train()
    for i, (input, target) in enumerate(loader):
        with autocast:
            output = model(input)
            loss = criterion(output, target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if i % args.log_every == 0:
            loss_value = loss.item()  # the loss meter's sync
            if i % 10 == 0:
                print(f"step {i}: loss {loss_value:.4f}", flush=True)
        timer.step()
        if timer.done:
            break
    return timer.report()


if __name__ == "__main__":
    main()
