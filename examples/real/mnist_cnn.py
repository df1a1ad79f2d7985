"""A small CNN on MNIST trained the way PyTorch's examples/mnist/main.py trains it.

The example's defaults: two 3x3 convolutions (32, 64 channels) with ReLU, a 2x2 max-pool,
dropout 0.25, a 9216 -> 128 linear layer, dropout 0.5, a 10-way linear head and
log-softmax with NLL loss; Adadelta at lr 1.0; batch 64 from a DataLoader with the
example's CUDA settings (`num_workers=1`, `pin_memory=True`, `shuffle=True`); every item
a 28 x 28 greyscale PIL image turned into a tensor and normalized by torchvision's
`ToTensor()` and `Normalize((0.1307,), (0.3081,))` in `__getitem__`, as torchvision's
MNIST dataset does; the batch moved with a plain `.to(device)`; the loss printed with
`loss.item()` every 10 batches (`--log-interval`). The 60,000 images are synthetic,
labelled by a fixed random linear rule, so the loss falls. Without torchvision the two
transforms are written out (the same arithmetic). Written out of sample (2026-12-06,
twelfth session): no membound rule was changed for it before it was measured.

Fixes, one flag each (what a user would try):
  --num-workers N       more loader processes than the example's one
  --membound-prefetch   membound.data.prefetch(loader): batches copied ahead on a side stream
  --compile             torch.compile(model)
  --cuda-graphs         the whole step (forward, backward, Adadelta's step) captured once
                        in a CUDA graph and replayed, the batch copied into static tensors
  --log-interval N      print the loss every N batches (the example's flag; default 10)

    python examples/real/mnist_cnn.py --steps 200
    membound diagnose -- python examples/real/mnist_cnn.py
"""

from __future__ import annotations

import importlib.util

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from _common import StepTimer, capture_step, parse, parser, pick
from PIL import Image

MEAN, STD = 0.1307, 0.3081


class Net(nn.Module):
    """The example's network."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


def _transform():
    """ToTensor() then Normalize, torchvision's where it is installed."""
    if importlib.util.find_spec("torchvision") is not None:
        from torchvision import transforms

        return transforms.Compose([transforms.ToTensor(), transforms.Normalize((MEAN,), (STD,))])

    def by_hand(img: Image.Image) -> torch.Tensor:
        t = torch.from_numpy(np.array(img, dtype=np.uint8)).unsqueeze(0).float().div(255)
        return (t - MEAN) / STD

    return by_hand


class SyntheticMNIST(torch.utils.data.Dataset):
    """60,000 28 x 28 uint8 images held like torchvision's MNIST (one uint8 tensor), each
    returned as a PIL image through the transform; labels from a fixed random linear rule."""

    def __init__(self, n: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        self.data = torch.randint(0, 256, (n, 28, 28), dtype=torch.uint8, generator=g)
        w = torch.randn(28 * 28, 10, generator=g)
        self.targets = (self.data.flatten(1).float() @ w).argmax(1)
        self.transform = _transform()

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int):
        img = Image.fromarray(self.data[i].numpy(), mode="L")
        return self.transform(img), int(self.targets[i])


def _capture(model, optimizer, data, target):
    """The whole step in one CUDA graph (`_common.capture_step`), on static copies of the
    first batch. Returns (graph, static data, static target, the loss the replays write)."""
    static_data, static_target = data.clone(), target.clone()

    def step():
        loss = F.nll_loss(model(static_data), static_target)
        loss.backward()
        optimizer.step()
        return loss

    graph, loss = capture_step(step, before=lambda: optimizer.zero_grad(set_to_none=True))
    return graph, static_data, static_target, loss


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__, steps=200, warmup=20)
    p.add_argument("--num-workers", type=int, default=None, metavar="N",
                   help="DataLoader workers (default: the example's 1 on CUDA, 0 on the CPU)")  # fmt: skip
    p.add_argument("--membound-prefetch", action="store_true",
                   help="membound.data.prefetch(loader)")  # fmt: skip
    p.add_argument("--compile", action="store_true", help="torch.compile(model)")
    p.add_argument("--cuda-graphs", action="store_true",
                   help="capture the whole step in a CUDA graph and replay it (CUDA only)")  # fmt: skip
    p.add_argument("--log-interval", type=int, default=10, metavar="N",
                   help="print the loss every N batches (default 10, as the example)")  # fmt: skip
    args = parse(p, argv)
    if args.log_interval < 1:
        p.error("--log-interval must be >= 1")
    if args.cuda_graphs and (not args.cuda or args.compile or args.membound_prefetch):
        p.error("--cuda-graphs needs --device cuda, and no --compile or --membound-prefetch")

    n = pick(args, 60000, 512)
    batch = pick(args, 64, 16)
    workers = args.num_workers if args.num_workers is not None else (1 if args.cuda else 0)
    loader_kwargs = {"batch_size": batch, "shuffle": True, "drop_last": True}
    if args.cuda:  # the example's cuda_kwargs
        loader_kwargs.update(num_workers=workers, pin_memory=True)
    elif workers:
        loader_kwargs.update(num_workers=workers)
    loader = torch.utils.data.DataLoader(SyntheticMNIST(n, args.seed), **loader_kwargs)
    if args.membound_prefetch:
        import membound.data

        loader = membound.data.prefetch(loader, device=args.device)

    model = Net().to(args.device)
    # capturable: Adadelta's step counter stays on the GPU, which a captured step needs
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0, capturable=args.cuda_graphs)
    net = torch.compile(model) if args.compile else model
    graphed = None

    timer = StepTimer("mnist_cnn", args)
    timer.extra = {"batch": batch, "workers": workers, "images": n}
    model.train()
    while not timer.done:
        for batch_idx, (data, target) in enumerate(loader):
            data, target = data.to(args.device), target.to(args.device)
            if args.cuda_graphs:
                if graphed is None:
                    graphed = _capture(model, optimizer, data, target)
                graph, static_data, static_target, loss = graphed
                static_data.copy_(data)
                static_target.copy_(target)
                graph.replay()
            else:
                optimizer.zero_grad()
                output = net(data)
                loss = F.nll_loss(output, target)
                loss.backward()
                optimizer.step()
            if batch_idx % args.log_interval == 0:  # the example's log line: a sync
                print(f"Train: [{batch_idx * len(data)}]\tLoss: {loss.item():.6f}")
            timer.step()
            if timer.done:
                break
    return timer.report()


if __name__ == "__main__":
    main()
