"""ResNet-18 on CIFAR-10 trained the way kuangliu/pytorch-cifar's main.py trains it.

The repository's defaults: its CIFAR ResNet-18 (a 3 x 3 stem of 64 channels at stride 1, no
max-pool, four stages of two BasicBlocks at 64, 128, 256 and 512 channels, a 4 x 4 average
pool and a 10-way linear head: 11,173,962 parameters), wrapped in `nn.DataParallel` on CUDA
(one GPU here, as the repository's users run it) with `cudnn.benchmark = True`; fp32;
cross-entropy, SGD (lr 0.1, momentum 0.9, weight decay 5e-4) and a cosine schedule over 200
epochs stepped at each epoch's end; batch 128 from a DataLoader with 2 workers and no
pin_memory, shuffled, over 50,000 32 x 32 uint8 HWC images held like torchvision's CIFAR10
(`.data`, `.targets`), each turned into a PIL image in `__getitem__` and put through
RandomCrop(32, padding=4), RandomHorizontalFlip, ToTensor and Normalize on the CPU; the batch
moved with a plain `.to(device)`; every step `loss.item()` and the correct count's `.item()`
are read and the progress bar redrawn (`\\r`). Images are synthetic: a random colour per image
plus noise, labelled by a fixed random linear rule of the colour, so the loss falls. Without
torchvision the four transforms are written out (the same arithmetic). The repository's test
pass after each epoch is left out: an epoch is 391 steps, past the timed window.

Fixes, one flag each (what a user would try):
  --num-workers N       more loader processes than the repository's 2
  --pin-memory          DataLoader(pin_memory=True)
  --membound-prefetch   membound.data.prefetch(loader): batches copied ahead on a side stream
  --amp                 bf16 autocast around the forward and the loss
  --channels-last       the model and the batches in channels_last
  --compile             torch.compile(net) where the model is built, inside the DataParallel
                        wrapper (on the CPU: backend "eager")
  --log-every N         read the loss and the correct count and redraw the bar every N steps,
                        summing them on the device in between (default 1, the repository's)
  --no-data-parallel    no nn.DataParallel wrapper

    python examples/real/cifar_resnet18.py --steps 100
    membound diagnose -- python examples/real/cifar_resnet18.py
"""

from __future__ import annotations

import importlib.util
import sys
import time

import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.nn.functional as F
from _common import StepTimer, parse, parser, pick
from PIL import Image

MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2023, 0.1994, 0.2010)


class BasicBlock(nn.Module):
    """Two 3 x 3 convolutions with BatchNorm; a 1 x 1 projection on the skip path when the
    stride or the width changes."""

    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != self.expansion * planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, self.expansion * planes, 1, stride=stride, bias=False),
                nn.BatchNorm2d(self.expansion * planes),
            )

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.shortcut(x)
        return F.relu(out)


class ResNet(nn.Module):
    """The CIFAR ResNet: a stride-1 3 x 3 stem (32 x 32 stays 32 x 32), four stages."""

    def __init__(self, block, num_blocks, num_classes: int = 10):
        super().__init__()
        self.in_planes = 64
        self.conv1 = nn.Conv2d(3, 64, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.layer1 = self._make_layer(block, 64, num_blocks[0], stride=1)
        self.layer2 = self._make_layer(block, 128, num_blocks[1], stride=2)
        self.layer3 = self._make_layer(block, 256, num_blocks[2], stride=2)
        self.layer4 = self._make_layer(block, 512, num_blocks[3], stride=2)
        self.linear = nn.Linear(512 * block.expansion, num_classes)

    def _make_layer(self, block, planes: int, num_blocks: int, stride: int) -> nn.Sequential:
        layers = []
        for s in [stride] + [1] * (num_blocks - 1):
            layers.append(block(self.in_planes, planes, s))
            self.in_planes = planes * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer4(self.layer3(self.layer2(self.layer1(out))))
        out = F.avg_pool2d(out, 4)
        out = out.view(out.size(0), -1)
        return self.linear(out)


def ResNet18() -> ResNet:
    return ResNet(BasicBlock, [2, 2, 2, 2])


def _transform_train():
    """RandomCrop(32, padding=4), RandomHorizontalFlip(), ToTensor(), Normalize: torchvision's
    where it is installed, else the same steps by hand (zero padding, torch's RNG)."""
    if importlib.util.find_spec("torchvision") is not None:
        import torchvision.transforms as transforms

        return transforms.Compose([
            transforms.RandomCrop(32, padding=4),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(MEAN, STD),
        ])  # fmt: skip

    mean, std = torch.tensor(MEAN).view(3, 1, 1), torch.tensor(STD).view(3, 1, 1)

    def by_hand(img: Image.Image) -> torch.Tensor:
        x = np.pad(np.asarray(img), ((4, 4), (4, 4), (0, 0)))
        i = int(torch.randint(0, 9, size=(1,)))
        j = int(torch.randint(0, 9, size=(1,)))
        x = x[i : i + 32, j : j + 32]
        if torch.rand(1) < 0.5:
            x = x[:, ::-1]
        t = torch.from_numpy(np.ascontiguousarray(x)).permute(2, 0, 1).contiguous()
        return (t.float().div(255) - mean) / std

    return by_hand


class SyntheticCIFAR10(torch.utils.data.Dataset):
    """`n` 32 x 32 RGB images held like torchvision's CIFAR10: `.data` one uint8 (n, 32, 32, 3)
    array, `.targets` a list of ints; each item a PIL image through the transform. An image is
    a random colour plus noise (a pool of noise tiles, so making 50,000 is quick); its label is
    the argmax of a fixed random linear function (with bias) of the colour."""

    def __init__(self, n: int, seed: int, transform=None):
        rng = np.random.default_rng(seed)
        noise = np.frombuffer(rng.bytes(4096 * 32 * 32 * 3), dtype=np.uint8) >> 2  # 0..63
        noise = noise.reshape(4096, 32, 32, 3)
        colour = rng.integers(0, 192, size=(n, 3), dtype=np.uint8)
        self.data = noise[rng.integers(0, len(noise), size=n)]
        self.data += colour[:, None, None, :]  # at most 254: no wrap-around
        # nearest of ten random colours: a linear score per class, c.p - |p|^2 / 2
        protos = rng.uniform(0, 192, size=(10, 3))
        scores = colour.astype(np.float64) @ protos.T - 0.5 * (protos**2).sum(1)
        self.targets = scores.argmax(1).tolist()
        self.transform = transform

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int):
        img, target = self.data[index], self.targets[index]
        img = Image.fromarray(img)
        if self.transform is not None:
            img = self.transform(img)
        return img, target


class ProgressBar:
    """The repository's progress_bar, kept cheap: one line a call (bar, time of the step and
    of the epoch, the message, batch i of n), ended by a carriage return, a newline after the
    last batch; written and flushed at once."""

    width = 30

    def __init__(self):
        self.begin = self.last = time.time()

    def __call__(self, current: int, total: int, msg: str) -> None:
        now = time.time()
        if current == 0:
            self.begin = now
        step_ms, tot_s = (now - self.last) * 1e3, now - self.begin
        self.last = now
        done = int(self.width * current / total)
        bar = "=" * done + ">" + "." * (self.width - done - 1)
        end = "\n" if current == total - 1 else "\r"
        line = f" [{bar}]  Step: {step_ms:.0f}ms | Tot: {tot_s:.1f}s | {msg} {current + 1}/{total}"
        sys.stdout.write(line + end)
        sys.stdout.flush()


def main(argv: list[str] | None = None) -> dict:
    # a step of ~10-20 ms on a GPU (estimated, not measured): 100 make a steady window; the
    # warm-up covers the workers' start and cuDNN's benchmark search, and 120 steps end well
    # inside the first epoch (391 steps)
    p = parser(__doc__, steps=100, warmup=20)
    p.add_argument("--num-workers", type=int, default=None, metavar="N",
                   help="DataLoader workers (default: the repository's 2 on CUDA, 0 on the CPU)")  # fmt: skip
    p.add_argument("--pin-memory", action="store_true", help="DataLoader(pin_memory=True)")
    p.add_argument("--membound-prefetch", action="store_true",
                   help="membound.data.prefetch(loader)")  # fmt: skip
    p.add_argument("--amp", action="store_true", help="bf16 autocast (forward and loss)")
    p.add_argument("--channels-last", action="store_true", help="channels_last model and images")
    p.add_argument("--compile", action="store_true", help="torch.compile(net)")
    p.add_argument("--log-every", type=int, default=1, metavar="N",
                   help="read the loss and accuracy, redraw the bar every N steps (default 1)")  # fmt: skip
    p.add_argument("--no-data-parallel", action="store_true",
                   help="leave out the nn.DataParallel wrapper (used on CUDA by default)")  # fmt: skip
    args = parse(p, argv)
    if args.log_every < 1:
        p.error("--log-every must be >= 1")
    if args.num_workers is not None and args.num_workers < 0:
        p.error("--num-workers must be >= 0")
    device = args.device

    n = pick(args, 50000, 512)
    batch = pick(args, 128, 8)
    workers = args.num_workers if args.num_workers is not None else pick(args, 2, 0)

    print("==> Preparing data..")
    trainset = SyntheticCIFAR10(n, args.seed, transform=_transform_train())
    trainloader = torch.utils.data.DataLoader(
        trainset,
        batch_size=batch,
        shuffle=True,
        num_workers=workers,
        pin_memory=args.pin_memory,
    )
    if args.membound_prefetch:
        import membound.data

        trainloader = membound.data.prefetch(trainloader, device=args.device)

    print("==> Building model..")
    net = ResNet18()
    net = net.to(device)
    if args.channels_last:
        net = net.to(memory_format=torch.channels_last)
    if args.compile:  # inductor on the GPU; the CPU smoke run only checks the loop
        net = torch.compile(net, backend="inductor" if args.cuda else "eager")
    if args.cuda:
        if not args.no_data_parallel:
            net = torch.nn.DataParallel(net)
        cudnn.benchmark = True

    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=200)
    amp = torch.autocast("cuda" if args.cuda else "cpu", dtype=torch.bfloat16, enabled=args.amp)
    progress_bar = ProgressBar()

    timer = StepTimer("cifar_resnet18", args)
    timer.extra = {
        "batch": batch,
        "workers": workers,
        "images": n,
        "pin_memory": args.pin_memory,
        "data_parallel": isinstance(net, nn.DataParallel),
    }
    epoch = 0
    while not timer.done:
        print(f"\nEpoch: {epoch}")
        net.train()
        train_loss, correct, total = 0.0, 0, 0
        loss_sum = torch.zeros((), device=device)  # --log-every: summed on the device
        correct_sum = torch.zeros((), dtype=torch.long, device=device)
        for batch_idx, (inputs, targets) in enumerate(trainloader):
            inputs, targets = inputs.to(device), targets.to(device)
            if args.channels_last:
                inputs = inputs.contiguous(memory_format=torch.channels_last)
            optimizer.zero_grad()
            with amp:
                outputs = net(inputs)
                loss = criterion(outputs, targets)
            loss.backward()
            optimizer.step()

            if args.log_every == 1:  # the repository's: two reads and a redraw every step
                train_loss += loss.item()
                _, predicted = outputs.max(1)
                total += targets.size(0)
                correct += predicted.eq(targets).sum().item()
                draw = True
            else:
                loss_sum += loss.detach()
                _, predicted = outputs.max(1)
                total += targets.size(0)
                correct_sum += predicted.eq(targets).sum()
                draw = (batch_idx + 1) % args.log_every == 0 or batch_idx + 1 == len(trainloader)
                if draw:
                    train_loss += loss_sum.item()
                    correct += int(correct_sum.item())
                    loss_sum.zero_()
                    correct_sum.zero_()
            if draw:
                progress_bar(batch_idx, len(trainloader),
                             f"Loss: {train_loss / (batch_idx + 1):.3f} | "
                             f"Acc: {100.0 * correct / total:.3f}% ({correct}/{total})")  # fmt: skip
            timer.step()
            if timer.done:
                break
        scheduler.step()
        epoch += 1
    print(flush=True)  # end the bar's line (the window closed inside an epoch)
    return timer.report()


if __name__ == "__main__":
    main()
