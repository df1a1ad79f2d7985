"""torchvision's classification reference, its ResNet-50 "new recipe", on JPEG files.

Written (2026-12-07, twentieth session) the way `references/classification/train.py` runs its
documented recipe on one GPU (`--model resnet50 --batch-size 128 --lr 0.5 --label-smoothing
0.1 --mixup-alpha 0.2 --cutmix-alpha 1.0 --auto-augment ta_wide --random-erase 0.1
--train-crop-size 176 --model-ema --workers 16`), before it was measured and before any rule
was changed for it:

- an `ImageFolder` of JPEG files (made once, on the spot, under the system's temp folder:
  ImageNet-sized pictures, 500 x 375, quality 90), decoded by PIL in the workers;
- the reference's train preset on PIL images: RandomResizedCrop(176), RandomHorizontalFlip,
  TrivialAugmentWide, PILToTensor, ConvertImageDtype, Normalize, RandomErasing(0.1);
- MixUp or CutMix applied in the collate function (in the workers), as the reference does;
- 16 workers (`-j 16`), `pin_memory=True`, `.to(device, non_blocking=True)`;
- ResNet-50 in fp32 (TF32 convolutions are cuDNN's default), label-smoothing cross-entropy on
  the mixed targets, SGD with momentum, a cosine schedule stepped per epoch;
- the model EMA (`torch.optim.swa_utils.AveragedModel` with the reference's per-tensor
  average function) updated every 32 steps;
- the metric logger: `loss.item()` and the top-1 and top-5 accuracies' `.item()` every step.

Fixes, one flag each:
  --workers N        DataLoader workers (the reference's -j; default 16)
  --amp              the reference's --amp: fp16 autocast and a GradScaler
  --channels-last    model and images in channels_last
  --compile          torch.compile(model) (the reference's --compile)
  --log-every N      the metric logger's reads every N steps, not every step
  --membound-prefetch  membound.data.prefetch(loader): pinned batches copied on a side stream
  --gpu-decode       the workers only read the files; the batch is decoded on the GPU
                     (torchvision.io.decode_jpeg, nvJPEG) and the same preset runs there, image
                     by image (added after the script was written, before it was measured: the
                     fix membound names for a loader whose host has no core to spare)

    python examples/real/classification_tv.py --steps 20
    membound diagnose -- python examples/real/classification_tv.py
"""

from __future__ import annotations

import math
import os
import tempfile
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.nn as nn
from _common import StepTimer, parse, parser, pick, require

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
#: the JPEG folder: classes x images per class, each width x height
CLASSES, PER_CLASS, WIDTH, HEIGHT = 50, 20, 500, 375


def jpeg_folder(classes: int, per_class: int, width: int, height: int) -> Path:
    """An ImageFolder tree of JPEG files, made once per size under the temp folder (written
    to a folder of its own, then renamed, so a second run never sees half of it)."""
    from PIL import Image

    root = Path(tempfile.gettempdir()) / f"membound_jpegs_{classes}x{per_class}_{width}x{height}"
    if root.is_dir():
        return root
    part = Path(tempfile.mkdtemp(prefix=root.name + ".part", dir=root.parent))
    g = torch.Generator().manual_seed(0)
    for c in range(classes):
        folder = part / f"n{c:08d}"
        folder.mkdir()
        for k in range(per_class):
            # smooth colour fields with grain: a photograph's frequencies, not white noise
            low = torch.rand(3, height // 25 + 1, width // 25 + 1, generator=g)
            img = torch.nn.functional.interpolate(
                low[None], size=(height, width), mode="bicubic", align_corners=False
            )[0]
            img = (img + 0.08 * torch.randn(3, height, width, generator=g)).clamp(0, 1)
            arr = (img * 255).to(torch.uint8).permute(1, 2, 0).contiguous().numpy()
            Image.fromarray(arr).save(folder / f"img_{k:04d}.JPEG", quality=90)
    try:
        os.replace(part, root)
    except OSError:  # another run made it first
        pass
    return root if root.is_dir() else part


def train_preset(transforms, crop: int, random_erase: float):
    """The reference's ClassificationPresetTrain with the PIL backend and ta_wide."""
    interpolation = transforms.InterpolationMode.BILINEAR
    steps = [
        transforms.RandomResizedCrop(crop, interpolation=interpolation, antialias=True),
        transforms.RandomHorizontalFlip(0.5),
        transforms.TrivialAugmentWide(interpolation=interpolation),
        transforms.PILToTensor(),
        transforms.ConvertImageDtype(torch.float),
        transforms.Normalize(mean=MEAN, std=STD),
    ]
    if random_erase > 0:
        steps.append(transforms.RandomErasing(p=random_erase))
    return transforms.Compose(steps)


class RandomMixupCutmix:
    """The reference's mixup / cutmix on a collated batch (one of the two, chosen at random):
    one-hot targets with label smoothing left to the loss, alpha 0.2 and 1.0."""

    def __init__(self, num_classes: int, mixup_alpha: float = 0.2, cutmix_alpha: float = 1.0):
        self.num_classes = num_classes
        self.mixup = torch.distributions.Beta(mixup_alpha, mixup_alpha)
        self.cutmix = torch.distributions.Beta(cutmix_alpha, cutmix_alpha)

    def __call__(self, batch):
        images, target = torch.utils.data.default_collate(batch)
        target = nn.functional.one_hot(target, self.num_classes).to(images.dtype)
        rolled_images, rolled_target = images.roll(1, 0), target.roll(1, 0)
        if torch.rand(1).item() < 0.5:
            lam = float(self.mixup.sample())
            images = images.mul(lam).add_(rolled_images, alpha=1 - lam)
        else:
            lam = float(self.cutmix.sample())
            h, w = images.shape[-2:]
            rh, rw = int(h * math.sqrt(1 - lam)), int(w * math.sqrt(1 - lam))
            cy, cx = int(torch.randint(h, (1,))), int(torch.randint(w, (1,)))
            y0, y1 = max(cy - rh // 2, 0), min(cy + rh // 2, h)
            x0, x1 = max(cx - rw // 2, 0), min(cx + rw // 2, w)
            images[:, :, y0:y1, x0:x1] = rolled_images[:, :, y0:y1, x0:x1]
            lam = 1.0 - (y1 - y0) * (x1 - x0) / (h * w)
        target = target.mul(lam).add_(rolled_target, alpha=1 - lam)
        return images, target


def collate_bytes(batch):
    """--gpu-decode's collate: the files' bytes as a list, the labels as a tensor."""
    return [data for data, _ in batch], torch.tensor([label for _, label in batch])


class GpuPreset:
    """--gpu-decode: the train preset on the device. The batch's JPEG bytes are decoded there
    in one call (nvJPEG); RandomResizedCrop, the flip and TrivialAugmentWide run image by image
    (torchvision's v2 transforms take device tensors), then the batch is normalized, erased
    image by image and mixed, as the CPU path does."""

    def __init__(self, torchvision, crop: int, device: str, num_classes: int):
        from torchvision.transforms import v2

        self.io = torchvision.io
        self.device = device
        interpolation = v2.InterpolationMode.BILINEAR
        self.per_image = v2.Compose(
            [
                v2.RandomResizedCrop(crop, interpolation=interpolation, antialias=True),
                v2.RandomHorizontalFlip(0.5),
                v2.TrivialAugmentWide(interpolation=interpolation),
            ]
        )
        self.erase = v2.RandomErasing(p=0.1)
        self.mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
        self.std = torch.tensor(STD, device=device).view(1, 3, 1, 1)
        self.mix = RandomMixupCutmix(num_classes)

    def __call__(self, datas, labels):
        images = self.io.decode_jpeg(datas, mode=self.io.ImageReadMode.RGB, device=self.device)
        x = torch.stack([self.per_image(im) for im in images])
        x = x.float().div_(255).sub_(self.mean).div_(self.std)
        labels = labels.to(self.device, non_blocking=True)
        return self.mix([(self.erase(im), t) for im, t in zip(x, labels, strict=True)])


def accuracy(output, target, topk=(1, 5)):
    """The reference's utils.accuracy: top-k against the hard labels (argmax of the mixed)."""
    with torch.inference_mode():
        maxk = max(topk)
        batch = target.size(0)
        if target.ndim == 2:
            target = target.max(dim=1)[1]
        _, pred = output.topk(maxk, 1, True, True)
        correct = pred.t().eq(target[None])
        return [correct[:k].flatten().sum(dtype=torch.float32) * (100.0 / batch) for k in topk]


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__, steps=20, warmup=8)
    p.add_argument("--batch-size", type=int, default=None, help="batch size (default 128)")
    p.add_argument(
        "--workers", type=int, default=None, help="DataLoader workers (the reference's -j; 16)"
    )
    p.add_argument("--amp", action="store_true", help="fp16 autocast and a GradScaler")
    p.add_argument("--channels-last", action="store_true", help="channels_last model and images")
    p.add_argument("--compile", action="store_true", help="torch.compile(model)")
    p.add_argument(
        "--log-every", type=int, default=1, metavar="N", help="metric reads every N steps"
    )
    p.add_argument(
        "--membound-prefetch",
        action="store_true",
        help="membound.data.prefetch(loader): pinned batches copied on a side stream",
    )
    p.add_argument(
        "--gpu-decode",
        action="store_true",
        help="decode (nvJPEG) and augment on the GPU; the workers only read the files",
    )
    args = parse(p, argv)
    if args.log_every < 1:
        p.error("--log-every must be >= 1")
    if args.gpu_decode and args.membound_prefetch:
        p.error("--gpu-decode and --membound-prefetch: the batch is decoded on the GPU already")
    torchvision = require("torchvision", "classification_tv.py")
    require("PIL", "classification_tv.py", "pillow")
    from torchvision import transforms

    batch = args.batch_size or pick(args, 128, 4)
    crop = pick(args, 176, 64)
    workers = args.workers if args.workers is not None else pick(args, 16, 0)
    num_classes = 1000
    size = (WIDTH, HEIGHT) if args.cuda else (96, 72)
    root = jpeg_folder(CLASSES if args.cuda else 2, PER_CLASS if args.cuda else 3, *size)
    if args.gpu_decode:
        dataset = torchvision.datasets.ImageFolder(str(root), loader=torchvision.io.read_file)
        gpu_preset = GpuPreset(torchvision, crop, args.device, num_classes)
    else:
        dataset = torchvision.datasets.ImageFolder(str(root), train_preset(transforms, crop, 0.1))
    steps_needed = args.warmup_steps + args.steps + 1
    # sample with replacement: the folder is small, the epoch the loop needs is not
    sampler = torch.utils.data.RandomSampler(
        dataset, replacement=True, num_samples=batch * steps_needed
    )
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=batch,
        sampler=sampler,
        num_workers=workers,
        pin_memory=args.cuda,
        drop_last=True,
        collate_fn=collate_bytes if args.gpu_decode else RandomMixupCutmix(num_classes),
    )
    if args.membound_prefetch:
        from membound.data import prefetch

        loader = prefetch(loader, device=args.device)

    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    model = torchvision.models.resnet50(num_classes=num_classes).to(
        args.device, memory_format=memory_format
    )
    model_without_ddp = model
    if args.compile:
        model = torch.compile(model)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    # --norm-weight-decay 0.0: norm parameters in a group of their own without decay
    norm_params, other_params = [], []
    for m in model_without_ddp.modules():
        is_norm = isinstance(m, (nn.modules.batchnorm._BatchNorm, nn.GroupNorm))
        (norm_params if is_norm else other_params).extend(m.parameters(recurse=False))
    optimizer = torch.optim.SGD(
        [
            {"params": other_params, "weight_decay": 2e-5},
            {"params": norm_params, "weight_decay": 0.0},
        ],
        lr=0.5,
        momentum=0.9,
    )
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=600)
    scaler = torch.amp.GradScaler("cuda") if args.amp and args.cuda else None

    # the reference's ExponentialMovingAverage: AveragedModel with a per-tensor average,
    # updated every --model-ema-steps 32 with decay 0.99998 adjusted for those steps
    ema_steps = 32
    decay = 1.0 - min(1.0, (1.0 - 0.99998) * batch * ema_steps / 600)

    def ema_avg(avg_param, param, num_averaged):
        return decay * avg_param + (1 - decay) * param

    model_ema = torch.optim.swa_utils.AveragedModel(
        model_without_ddp, device=args.device, avg_fn=ema_avg, use_buffers=True
    )
    autocast = (
        torch.autocast(device_type="cuda", dtype=torch.float16)
        if args.amp and args.cuda
        else nullcontext()
    )

    timer = StepTimer("classification_tv", args)
    timer.extra = {
        "batch": batch,
        "workers": workers,
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
    }
    model.train()
    for i, (image, target) in enumerate(loader):
        if args.gpu_decode:
            image, target = gpu_preset(image, target)
        image = image.to(args.device, non_blocking=True, memory_format=memory_format)
        target = target.to(args.device, non_blocking=True)
        with autocast:
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
        if i % ema_steps == 0:
            model_ema.update_parameters(model_without_ddp)
        if i % args.log_every == 0:  # the metric logger's reads
            acc1, acc5 = accuracy(output, target)
            loss_value, acc1_value, acc5_value = loss.item(), acc1.item(), acc5.item()
            if i % 10 == 0:
                print(
                    f"step {i}: loss {loss_value:.4f} acc1 {acc1_value:.1f} "
                    f"acc5 {acc5_value:.1f} lr {optimizer.param_groups[0]['lr']:.3f}",
                    flush=True,
                )
        timer.step()
        if timer.done:
            break
    scheduler.step()
    return timer.report()


if __name__ == "__main__":
    main()
