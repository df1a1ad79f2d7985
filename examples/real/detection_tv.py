"""Faster R-CNN ResNet-50-FPN trained the way torchvision's detection reference trains it.

The reference's defaults on one GPU (references/detection/train.py, engine.py's
`train_one_epoch`, utils.py): `fasterrcnn_resnet50_fpn(weights=None, weights_backbone=None,
num_classes=91)` (from scratch: plain BatchNorm, every backbone layer trained; the model's
own transform resizes each image to 800 on its short side, at most 1333, and batches them),
fp32; SGD over the parameters that require grad (lr 0.02, momentum 0.9, weight decay 1e-4),
MultiStepLR (16, 22) stepped per epoch and, in the first epoch, a LinearLR warm-up from
lr / 1000 stepped every iteration; batch 2 (`-b 2`) from a DataLoader with 4 workers (`-j 4`),
a RandomSampler grouped by aspect ratio (`--aspect-ratio-group-factor 3`: the
GroupedBatchSampler, written out here), `collate_fn` = tuple(zip(*batch)), no `pin_memory`;
the COCO items as the reference's v1 path makes them: a PIL image and a target dict (boxes,
labels, the boxes' bool masks at image size, image_id, area, iscrowd: the reference converts
every polygon to a mask even for Faster R-CNN), put through DetectionPresetTrain("hflip")
(RandomHorizontalFlip(0.5) of the image, boxes and masks, PILToTensor, ConvertImageDtype
to float: written out here, the same arithmetic as torchvision's functional ops). Each step
moves every image and every target tensor with its own `.to(device)`, sums the four losses,
reads the total with `.item()` for the finiteness check, and MetricLogger's `update` reads
the total and the four losses with `.item()` again (six reads a step); a log line every 20
iterations. Images are synthetic: 2,000 of COCO's sizes (400-640 x 500-640), a shared noise
pool shifted by a colour per image, with 1-8 boxes (labels 1-90) painted in; no JPEG is
decoded and there is no evaluation pass (an epoch is 1,000 steps, past the timed window).

Fixes, one flag each (what a user would try):
  --amp                 the reference's --amp: fp16 autocast with a GradScaler (CUDA only)
  --num-workers N       (-j) more loader processes than the reference's 4
  --pin-memory          DataLoader(pin_memory=True)
  --membound-prefetch   membound.data.prefetch(loader): batches copied ahead on a side stream
  --log-every N         update the metric logger (its .item() reads) and check the loss every
                        N steps, not every step (default 1, the reference's)
  --tf32                TF32 matmuls and convolutions
  --channels-last       the model in channels_last (its transform still batches the images)
  --compile             torch.compile(model, dynamic=True): what membound names for the launch
                        gaps of a step whose shapes change (no CUDA graph fits it)

    python examples/real/detection_tv.py --steps 50
    membound diagnose -- python examples/real/detection_tv.py
"""

from __future__ import annotations

import bisect
import datetime
import math
import sys
import time
from collections import defaultdict, deque

import numpy as np
import torch
import torch.distributed as dist
from _common import StepTimer, parse, parser, pick, require
from PIL import Image

#: the smallest box side, in pixels
MIN_BOX = 8
#: the reference's --print-freq
PRINT_FREQ = 20
_FLIP = getattr(Image, "Transpose", Image).FLIP_LEFT_RIGHT


# -- the reference's detection transforms (its transforms.py), written out ---------------------
class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, image, target):
        for t in self.transforms:
            image, target = t(image, target)
        return image, target


class RandomHorizontalFlip:
    """Flip the PIL image, its boxes' x coordinates and its masks with probability `p`."""

    def __init__(self, p: float = 0.5):
        self.p = p

    def __call__(self, image, target=None):
        if torch.rand(1) < self.p:
            image = image.transpose(_FLIP)  # F.hflip of a PIL image
            if target is not None:
                width = image.size[0]
                target["boxes"][:, [0, 2]] = width - target["boxes"][:, [2, 0]]
                if "masks" in target:
                    target["masks"] = target["masks"].flip(-1)
        return image, target


class PILToTensor:
    """F.pil_to_tensor: the HWC uint8 pixels viewed as CHW (a permuted view, not a copy)."""

    def __call__(self, image, target=None):
        pixels = torch.as_tensor(np.array(image, copy=True))
        pixels = pixels.view(image.size[1], image.size[0], len(image.getbands()))
        return pixels.permute((2, 0, 1)), target


class ConvertImageDtype:
    """F.convert_image_dtype from uint8 to a float dtype: cast, then divide by 255."""

    def __init__(self, dtype: torch.dtype):
        self.dtype = dtype

    def __call__(self, image, target=None):
        return image.to(self.dtype) / 255.0, target


def detection_preset_train(hflip_prob: float = 0.5) -> Compose:
    """DetectionPresetTrain(data_augmentation="hflip") on PIL images."""
    return Compose(
        [RandomHorizontalFlip(hflip_prob), PILToTensor(), ConvertImageDtype(torch.float)]
    )


# -- the data ----------------------------------------------------------------------------------
class SyntheticCoco(torch.utils.data.Dataset):
    """`n` COCO-like items: a PIL RGB image of a random COCO size (drawn up front, as COCO's
    annotation file lists them, so the aspect-ratio grouping reads them without loading)
    and its target, made in `__getitem__` from a seed of (seed, index): a window of a shared
    noise pool plus a colour, with 1-8 boxes of at least MIN_BOX pixels painted in."""

    def __init__(self, n: int, heights: tuple, widths: tuple, seed: int = 0, transforms=None,
                 max_boxes: int = 8):  # fmt: skip
        rng = np.random.default_rng(seed)
        self.noise = rng.integers(0, 256, (heights[1] + 32, widths[1] + 32, 3), dtype=np.uint8)
        hs = rng.integers(heights[0], heights[1] + 1, n)
        ws = rng.integers(widths[0], widths[1] + 1, n)
        self.sizes = [(int(h), int(w)) for h, w in zip(hs, ws, strict=True)]
        self.palette = rng.integers(0, 256, (91, 3), dtype=np.uint8)
        self.seed, self.transforms, self.max_boxes = seed, transforms, max_boxes

    def __len__(self) -> int:
        return len(self.sizes)

    def get_height_and_width(self, i: int) -> tuple[int, int]:
        return self.sizes[i]

    def __getitem__(self, i: int):
        h, w = self.sizes[i]
        rng = np.random.default_rng([self.seed, i])
        top = int(rng.integers(0, self.noise.shape[0] - h + 1))
        left = int(rng.integers(0, self.noise.shape[1] - w + 1))
        pixels = self.noise[top : top + h, left : left + w] + rng.integers(0, 256, 3, np.uint8)
        k = int(rng.integers(1, self.max_boxes + 1))
        x0 = rng.integers(0, w - MIN_BOX + 1, k)
        y0 = rng.integers(0, h - MIN_BOX + 1, k)
        x1 = x0 + rng.integers(MIN_BOX, w - x0 + 1)
        y1 = y0 + rng.integers(MIN_BOX, h - y0 + 1)
        labels = rng.integers(1, 91, k)
        masks = torch.zeros((k, h, w), dtype=torch.bool)
        for j in range(k):
            a, b, c, d = int(x0[j]), int(y0[j]), int(x1[j]), int(y1[j])
            pixels[b:d, a:c] = self.palette[labels[j]]
            masks[j, b:d, a:c] = True
        image = Image.fromarray(pixels)
        target = {
            "boxes": torch.from_numpy(np.stack([x0, y0, x1, y1], axis=1).astype(np.float32)),
            "labels": torch.from_numpy(labels).to(torch.int64),
            "masks": masks,
            "image_id": i,
            "area": torch.from_numpy(((x1 - x0) * (y1 - y0)).astype(np.float32)),
            "iscrowd": torch.zeros(k, dtype=torch.int64),
        }
        if self.transforms is not None:
            image, target = self.transforms(image, target)
        return image, target


def collate_fn(batch):
    """The reference's utils.collate_fn: (images, targets), each a tuple."""
    return tuple(zip(*batch, strict=True))


def aspect_ratio_groups(sizes: list[tuple[int, int]], k: int) -> list[int]:
    """create_aspect_ratio_groups: each image's width / height quantized into 2k + 2 bins
    spaced evenly in log2 between 1/2 and 2."""
    bins = sorted((2 ** np.linspace(-1, 1, 2 * k + 1)).tolist()) if k > 0 else [1.0]
    return [bisect.bisect_right(bins, w / h) for h, w in sizes]


class GroupedBatchSampler(torch.utils.data.Sampler):
    """Batches of `batch_size` indices of one group each, in the order `sampler` gives them;
    at the end, the fullest unfinished groups are topped up with their own earlier indices,
    so that an epoch has `len(sampler) // batch_size` batches."""

    def __init__(self, sampler, group_ids: list[int], batch_size: int):
        self.sampler, self.group_ids, self.batch_size = sampler, group_ids, batch_size

    def __iter__(self):
        waiting: dict[int, list[int]] = defaultdict(list)
        seen: dict[int, list[int]] = defaultdict(list)
        made = 0
        for idx in self.sampler:
            group = self.group_ids[idx]
            waiting[group].append(idx)
            seen[group].append(idx)
            if len(waiting[group]) == self.batch_size:
                yield waiting.pop(group)
                made += 1
        left = len(self) - made
        for group, idxs in sorted(waiting.items(), key=lambda kv: len(kv[1]), reverse=True):
            if left <= 0:
                break
            yield idxs + seen[group][: self.batch_size - len(idxs)]
            left -= 1

    def __len__(self) -> int:
        return len(self.sampler) // self.batch_size


# -- the reference's utils.py: SmoothedValue, MetricLogger, reduce_dict, written out -----------
class SmoothedValue:
    """A window of recent values (median, mean) and the running mean of all of them."""

    def __init__(self, window_size: int = 20, fmt: str | None = None):
        self.deque: deque = deque(maxlen=window_size)
        self.total, self.count = 0.0, 0
        self.fmt = fmt or "{median:.4f} ({global_avg:.4f})"

    def update(self, value, n: int = 1) -> None:
        self.deque.append(value)
        self.count += n
        self.total += value * n

    @property
    def median(self) -> float:
        return torch.tensor(list(self.deque)).median().item()  # a CPU tensor: no GPU sync

    @property
    def avg(self) -> float:
        return torch.tensor(list(self.deque), dtype=torch.float32).mean().item()

    @property
    def global_avg(self) -> float:
        return self.total / self.count

    @property
    def max(self):
        return max(self.deque)

    @property
    def value(self):
        return self.deque[-1]

    def __str__(self) -> str:
        return self.fmt.format(median=self.median, avg=self.avg, global_avg=self.global_avg,
                               max=self.max, value=self.value)  # fmt: skip


class MetricLogger:
    """utils.MetricLogger: `update` turns every tensor into a number with `.item()`."""

    def __init__(self, delimiter: str = "\t"):
        self.meters: dict[str, SmoothedValue] = defaultdict(SmoothedValue)
        self.delimiter = delimiter

    def update(self, **kwargs) -> None:
        for name, v in kwargs.items():
            if isinstance(v, torch.Tensor):
                v = v.item()
            if not isinstance(v, (float, int)):
                raise TypeError(f"{name}: a number or a one-element tensor, not {type(v)}")
            self.meters[name].update(v)

    def add_meter(self, name: str, meter: SmoothedValue) -> None:
        self.meters[name] = meter

    def __str__(self) -> str:
        return self.delimiter.join(f"{name}: {meter}" for name, meter in self.meters.items())

    def log_every(self, iterable, print_freq: int, header: str = ""):
        """Yield from `iterable`, printing the meters, the step and data times every
        `print_freq` items (and at the last)."""
        i = 0
        start = end = time.time()
        iter_time, data_time = SmoothedValue(fmt="{avg:.4f}"), SmoothedValue(fmt="{avg:.4f}")
        width = len(str(len(iterable)))
        cuda = torch.cuda.is_available()
        for obj in iterable:
            data_time.update(time.time() - end)
            yield obj
            iter_time.update(time.time() - end)
            if i % print_freq == 0 or i == len(iterable) - 1:
                eta = datetime.timedelta(seconds=int(iter_time.global_avg * (len(iterable) - i)))
                parts = [header, f"[{i:{width}d}/{len(iterable)}]", f"eta: {eta}", str(self),
                         f"time: {iter_time}", f"data: {data_time}"]  # fmt: skip
                if cuda:
                    parts.append(f"max mem: {torch.cuda.max_memory_allocated() / 2**20:.0f}")
                print(self.delimiter.join(parts), flush=True)
            i += 1
            end = time.time()
        total = time.time() - start
        print(f"{header} Total time: {datetime.timedelta(seconds=int(total))} "
              f"({total / max(len(iterable), 1):.4f} s / it)")  # fmt: skip


def reduce_dict(input_dict: dict, average: bool = True) -> dict:
    """utils.reduce_dict: the losses averaged over the processes; one process: as they are."""
    world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    if world < 2:
        return input_dict
    with torch.no_grad():
        names = sorted(input_dict)
        values = torch.stack([input_dict[k] for k in names])
        dist.all_reduce(values)
        if average:
            values /= world
        return dict(zip(names, values, strict=True))


# -- the training loop -------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> dict:
    # a step of ~100 ms on a GPU (estimated, not measured): 50 make a window; the warm-up
    # covers the workers' start and cuDNN's first calls at new shapes
    p = parser(__doc__, steps=50, warmup=10)
    p.add_argument("-b", "--batch-size", type=int, default=2, help="images per step (default 2)")
    p.add_argument("-j", "--num-workers", type=int, default=None, metavar="N",
                   help="DataLoader workers (default: 4, the reference's; 0 on CPU)")  # fmt: skip
    p.add_argument("--images", type=int, default=None, metavar="N",
                   help="synthetic images (default 2000 on CUDA, 16 on the CPU)")  # fmt: skip
    p.add_argument("--aspect-ratio-group-factor", type=int, default=3, metavar="K",
                   help="batches grouped by aspect ratio (default 3; -1: not)")  # fmt: skip
    p.add_argument("--amp", action="store_true", help="fp16 autocast with a GradScaler")
    p.add_argument("--pin-memory", action="store_true", help="DataLoader(pin_memory=True)")
    p.add_argument("--membound-prefetch", action="store_true",
                   help="membound.data.prefetch(loader)")  # fmt: skip
    p.add_argument("--log-every", type=int, default=1, metavar="N",
                   help="log (the .item() reads) every N steps (default 1)")  # fmt: skip
    p.add_argument("--tf32", action="store_true", help="allow TF32 matmuls and convolutions")
    p.add_argument("--channels-last", action="store_true", help="the model in channels_last")
    p.add_argument("--compile", action="store_true", help="torch.compile(model, dynamic=True)")
    args = parse(p, argv)
    if args.log_every < 1:
        p.error("--log-every must be >= 1")
    if args.batch_size < 1:
        p.error("--batch-size must be >= 1")
    if args.num_workers is not None and args.num_workers < 0:
        p.error("--num-workers must be >= 0")
    if args.amp and not args.cuda:
        p.error("--amp (fp16 autocast with a GradScaler) needs --device cuda")
    n = args.images if args.images is not None else pick(args, 2000, 16)
    if n < 2 * args.batch_size:
        p.error(f"--images must give at least two batches of {args.batch_size} (got {n})")
    tv = require("torchvision", "detection_tv.py")
    from torchvision.models.detection import fasterrcnn_resnet50_fpn

    device = torch.device(args.device)
    batch = args.batch_size
    workers = args.num_workers if args.num_workers is not None else pick(args, 4, 0)
    heights, widths = pick(args, ((400, 640), (500, 640)), ((96, 160), (120, 160)))
    if args.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    print("Loading data")
    dataset = SyntheticCoco(n, heights, widths, args.seed, transforms=detection_preset_train())
    print("Creating data loaders")
    train_sampler = torch.utils.data.RandomSampler(dataset)
    if args.aspect_ratio_group_factor >= 0:
        group_ids = aspect_ratio_groups(dataset.sizes, args.aspect_ratio_group_factor)
        batch_sampler = GroupedBatchSampler(train_sampler, group_ids, batch)
    else:
        batch_sampler = torch.utils.data.BatchSampler(train_sampler, batch, drop_last=True)
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_sampler=batch_sampler,
        num_workers=workers,
        collate_fn=collate_fn,
        pin_memory=args.pin_memory,
    )
    if args.membound_prefetch:
        import membound.data

        loader = membound.data.prefetch(loader, device=args.device)

    print("Creating model")
    # on the CPU: the same network on small images (its transform resizes them), for speed
    sizes = pick(args, {}, {"min_size": 128, "max_size": 160})
    model = fasterrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=91, **sizes)
    model.to(device)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    net = torch.compile(model, dynamic=True) if args.compile else model

    params = [q for q in model.parameters() if q.requires_grad]
    optimizer = torch.optim.SGD(params, lr=0.02, momentum=0.9, weight_decay=1e-4)
    lr_scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[16, 22], gamma=0.1)
    scaler = torch.amp.GradScaler("cuda") if args.amp else None
    autocast_device = "cuda" if args.cuda else "cpu"

    timer = StepTimer("detection_tv", args)
    timer.extra = {
        "batch": batch,
        "workers": workers,
        "images": n,
        "amp": args.amp,
        "min_size": int(min(model.transform.min_size)),
        "max_size": int(model.transform.max_size),
        "torchvision": tv.__version__,
    }
    print("Start training")
    epoch = 0
    while not timer.done:
        # engine.train_one_epoch
        model.train()
        metric_logger = MetricLogger(delimiter="  ")
        metric_logger.add_meter("lr", SmoothedValue(window_size=1, fmt="{value:.6f}"))
        warmup = None
        if epoch == 0:
            warmup_iters = min(1000, len(loader) - 1)
            warmup = torch.optim.lr_scheduler.LinearLR(
                optimizer, start_factor=1.0 / 1000, total_iters=warmup_iters
            )
        i = 0
        for images, targets in metric_logger.log_every(loader, PRINT_FREQ, f"Epoch: [{epoch}]"):
            images = list(image.to(device) for image in images)
            targets = [{k: v.to(device) if isinstance(v, torch.Tensor) else v
                        for k, v in t.items()} for t in targets]  # fmt: skip
            with torch.autocast(autocast_device, enabled=scaler is not None):
                loss_dict = net(images, targets)
                losses = sum(loss for loss in loss_dict.values())

            # reduce losses over all GPUs for logging purposes
            loss_dict_reduced = reduce_dict(loss_dict)
            losses_reduced = sum(loss for loss in loss_dict_reduced.values())
            logged = i % args.log_every == 0

            if logged:
                loss_value = losses_reduced.item()
                if not math.isfinite(loss_value):
                    print(f"Loss is {loss_value}, stopping training")
                    print(loss_dict_reduced)
                    sys.exit(1)

            optimizer.zero_grad()
            if scaler is not None:
                scaler.scale(losses).backward()
                scaler.step(optimizer)
                scaler.update()
            else:
                losses.backward()
                optimizer.step()

            if warmup is not None:
                warmup.step()

            if logged:
                metric_logger.update(loss=losses_reduced, **loss_dict_reduced)
                metric_logger.update(lr=optimizer.param_groups[0]["lr"])
            i += 1
            timer.step()
            if timer.done:
                break
        lr_scheduler.step()
        epoch += 1
    return timer.report()


if __name__ == "__main__":
    main()
