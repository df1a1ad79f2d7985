"""A LightningModule trained with `Trainer.fit`, the way Lightning's image examples are written.

A ResNet-18-style classifier (BasicBlocks, 64-128-256-512 channels) on ImageNet-size inputs
(batch 64 of 3 x 224 x 224, fp32, normalized on the CPU as torchvision's ToTensor+Normalize
leave them), SGD with momentum, `self.log("train_loss", ..., prog_bar=True)`, Lightning's
defaults otherwise (progress bar on, 32-bit precision). The DataLoader has 4 workers and no
`pin_memory`, so Lightning's `non_blocking=True` batch transfer copies from pageable memory
and blocks the host. Images are synthetic (a fixed pool, so loading costs little).

Fixes, one flag each:
  --pin-memory          DataLoader(pin_memory=True)
  --membound-prefetch   trainer.fit(model, membound.data.prefetch(loader)): batches arrive on
                        the GPU ahead of the step (Lightning accepts any iterable as
                        train_dataloaders; a batch already on the device is not moved again)
  --precision P         Trainer(precision=P), e.g. bf16-mixed
  --refresh-rate N      TQDMProgressBar(refresh_rate=N): the bar reads the logged loss (a
                        sync) every N steps instead of every step

    python examples/real/lightning_fit.py --steps 30
    membound diagnose -- python examples/real/lightning_fit.py
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from _common import StepTimer, add_prefetch_options, parse, parser, pick, prefetch_kwargs, require

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.down is None else self.down(x)))


class ResNet18ish(nn.Module):
    def __init__(self, num_classes: int = 1000, widths=(64, 128, 256, 512)):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, widths[0], 7, 2, 3, bias=False),
            nn.BatchNorm2d(widths[0]),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        )
        layers, cin = [], widths[0]
        for i, w in enumerate(widths):
            stride = 1 if i == 0 else 2
            layers += [BasicBlock(cin, w, stride), BasicBlock(w, w, 1)]
            cin = w
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class SyntheticImages(torch.utils.data.Dataset):
    """`n` normalized fp32 CHW images drawn from a small fixed pool, with labels."""

    def __init__(self, n: int, size: int, num_classes: int, pool: int = 32):
        g = torch.Generator().manual_seed(0)
        raw = torch.rand(pool, 3, size, size, generator=g)
        mean, std = torch.tensor(MEAN).view(3, 1, 1), torch.tensor(STD).view(3, 1, 1)
        self.images = (raw - mean) / std
        self.labels = torch.randint(0, num_classes, (n,), generator=g)
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        return self.images[i % len(self.images)], self.labels[i]


def build(L, args, timer: StepTimer):
    """The LightningModule and the timing callback (classes made here: `L` is imported late,
    so `--help` works without Lightning)."""

    class LitClassifier(L.LightningModule):
        def __init__(self, num_classes: int, width: int):
            super().__init__()
            self.save_hyperparameters()
            widths = tuple(width * m for m in (1, 2, 4, 8))
            self.model = ResNet18ish(num_classes, widths)

        def forward(self, x):
            return self.model(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = F.cross_entropy(self(x), y)
            self.log("train_loss", loss, prog_bar=True)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)

    class StepTimerCallback(L.Callback):
        """The plain step timer at every batch end (after the optimizer step)."""

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            timer.step()

    return LitClassifier(1000, pick(args, 64, 8)), StepTimerCallback()


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__, steps=30, warmup=5)
    p.add_argument("--batch-size", type=int, default=None, help="batch size (default 64)")
    p.add_argument("--workers", type=int, default=None, help="DataLoader workers (default 4)")
    p.add_argument("--pin-memory", action="store_true", help="DataLoader(pin_memory=True)")
    p.add_argument(
        "--membound-prefetch",
        action="store_true",
        help="fit on membound.data.prefetch(loader) instead of the loader",
    )
    add_prefetch_options(p)
    p.add_argument(
        "--precision", default="32-true", help="Trainer precision (default 32-true; bf16-mixed)"
    )
    p.add_argument(
        "--refresh-rate",
        type=int,
        default=1,
        metavar="N",
        help="progress bar refresh rate in steps (default 1, Lightning's default)",
    )
    args = parse(p, argv)
    L = require("lightning", "lightning_fit.py")
    from lightning.pytorch.callbacks import TQDMProgressBar

    batch = args.batch_size or pick(args, 64, 2)
    size = pick(args, 224, 32)
    workers = args.workers if args.workers is not None else pick(args, 4, 0)
    timer = StepTimer("lightning_fit", args)
    timer.extra = {"batch": batch, "workers": workers, "lightning": L.__version__}
    L.seed_everything(args.seed, verbose=False)
    model, timing = build(L, args, timer)
    dataset = SyntheticImages(batch * (timer.total_steps + 2), size, 1000)
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=batch,
        shuffle=True,
        num_workers=workers,
        pin_memory=args.pin_memory,
        drop_last=True,
    )
    if args.membound_prefetch:
        import membound.data

        loader = membound.data.prefetch(loader, args.device, **prefetch_kwargs(args))
    trainer = L.Trainer(
        accelerator="gpu" if args.cuda else "cpu",
        devices=1,
        precision=args.precision,
        max_steps=timer.total_steps,
        max_epochs=-1,
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=[timing, TQDMProgressBar(refresh_rate=args.refresh_rate)],
    )
    trainer.fit(model, train_dataloaders=loader)
    return timer.report()


if __name__ == "__main__":
    main()
