"""A tabular MLP trained the way the PyTorch tutorials and most Kaggle notebooks write it.

The features live in host memory as one float32 tensor (1M rows x 64 columns), wrapped in
a `TensorDataset` and served by a `DataLoader(batch_size=1024, shuffle=True)` left at its
defaults: no workers, no pinned memory, the default collate (one `__getitem__` per row,
then a stack). The model is a 4-block MLP (Linear 512, BatchNorm1d, ReLU, Dropout) with a
binary head, trained with `BCEWithLogitsLoss` and Adam at its defaults, the running loss
read with `loss.item()` every step. Labels come from a fixed random linear rule, so the
loss falls.

Fixes, one flag each (what a user would try):
  --num-workers N       DataLoader(num_workers=N): rows collated in worker processes
  --pin-memory          DataLoader(pin_memory=True)
  --membound-prefetch   membound.data.prefetch(loader): batches copied ahead on a side stream
  --batch-index         sample whole batches and index the tensors once per batch (a
                        BatchSampler with batch_size=None: no per-row collate)
  --compile             torch.compile(model)
  --log-every N         read the running loss every N steps, not every step

    python examples/real/tabular_mlp.py --steps 30
    membound diagnose -- python examples/real/tabular_mlp.py
"""

from __future__ import annotations

import torch
import torch.nn as nn
from _common import StepTimer, parse, parser, pick


def mlp(features: int, hidden: int, blocks: int, dropout: float = 0.1) -> nn.Sequential:
    """Linear -> BatchNorm1d -> ReLU -> Dropout, `blocks` times, then one logit."""
    layers: list[nn.Module] = []
    width = features
    for _ in range(blocks):
        layers += [nn.Linear(width, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Dropout(dropout)]
        width = hidden
    layers.append(nn.Linear(width, 1))
    return nn.Sequential(*layers)


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__, steps=30, warmup=5)
    p.add_argument("--batch-size", type=int, default=None, help="rows per batch (default 1024)")
    p.add_argument("--rows", type=int, default=None, help="dataset rows (default 1048576)")
    p.add_argument("--num-workers", type=int, default=0, metavar="N", help="(default 0)")
    p.add_argument("--pin-memory", action="store_true", help="DataLoader(pin_memory=True)")
    p.add_argument(
        "--membound-prefetch", action="store_true", help="membound.data.prefetch(loader)"
    )
    p.add_argument(
        "--batch-index",
        action="store_true",
        help="index the tensors once per batch (BatchSampler, batch_size=None)",
    )
    p.add_argument("--compile", action="store_true", help="torch.compile(model)")
    p.add_argument(
        "--log-every",
        type=int,
        default=1,
        metavar="N",
        help="loss.item() every N steps (default 1)",
    )
    args = parse(p, argv)
    if args.log_every < 1 or args.num_workers < 0:
        p.error("--log-every must be >= 1 and --num-workers >= 0")

    features = 64
    batch = args.batch_size or pick(args, 1024, 64)
    rows = args.rows or pick(args, 1 << 20, 4096)
    g = torch.Generator().manual_seed(args.seed)
    X = torch.randn(rows, features, generator=g)
    rule = torch.randn(features, generator=g)
    y = (X @ rule > 0).float()
    dataset = torch.utils.data.TensorDataset(X, y)
    if args.batch_index:
        # the well-known fix: one index per batch, the tensors sliced once
        sampler = torch.utils.data.BatchSampler(
            torch.utils.data.RandomSampler(dataset, generator=g), batch, drop_last=True
        )
        loader = torch.utils.data.DataLoader(
            dataset,
            sampler=sampler,
            batch_size=None,
            num_workers=args.num_workers,
            pin_memory=args.pin_memory,
        )
    else:
        loader = torch.utils.data.DataLoader(
            dataset,
            batch_size=batch,
            shuffle=True,
            num_workers=args.num_workers,
            pin_memory=args.pin_memory,
            drop_last=True,
            generator=g,
        )
    if args.membound_prefetch:
        import membound.data

        loader = membound.data.prefetch(loader, args.device)

    model = mlp(features, pick(args, 512, 32), 4).to(args.device)
    if args.compile:
        model = torch.compile(model)
    criterion = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    timer = StepTimer("tabular_mlp", args)
    timer.extra = {"batch": batch, "rows": rows, "workers": args.num_workers}
    model.train()
    running_loss, seen = 0.0, 0
    while not timer.done:
        for i, (xb, yb) in enumerate(loader):
            xb, yb = xb.to(args.device), yb.to(args.device)
            optimizer.zero_grad()
            out = model(xb)
            loss = criterion(out.squeeze(1), yb)
            loss.backward()
            optimizer.step()
            if i % args.log_every == 0:
                running_loss += loss.item()  # the tutorial's running loss: a sync
                seen += 1
            timer.step()
            if timer.done:
                break
    print(f"mean logged loss {running_loss / max(seen, 1):.4f}", flush=True)
    return timer.report()


if __name__ == "__main__":
    main()
