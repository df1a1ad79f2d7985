"""A timm ViT-B/16 trained the way timm's train.py runs it without its prefetcher.

`timm.create_model("vit_base_patch16_224")` (86M parameters, random init), bf16 autocast
(`--amp --amp-dtype bfloat16`), AdamW, label-smoothing cross-entropy, batch 64 of
3 x 224 x 224. The loader is what `--no-prefetcher` gives: a DataLoader with 8 workers that
flip, convert and normalize each image on the CPU (fp32 batches cross PCIe), `pin_memory`
off (timm's default), batches moved with `.cuda(non_blocking=True)`, the loss read with
`loss.item()` every step for the running meter. Images are a fixed pool of random uint8
pictures.

Fixes, one flag each:
  --pin-mem             DataLoader(pin_memory=True) (timm's --pin-mem)
  --membound-prefetch   membound.data.prefetch(loader): pinned batches on a side stream
  --swap-norms          membound.swap_norms(model) (the ViT's 25 LayerNorms)
  --compile             torch.compile(model) (timm's --torchcompile)
  --fused-optimizer     AdamW(fused=True): one kernel for the update (timm's --opt fusedadamw)
  --log-every N         read the loss every N steps (timm's log interval), not every step
  --cuda-graphs         forward, backward and AdamW's step captured once in a CUDA graph and
                        replayed, each batch copied into static inputs (membound's graph_step
                        remedy; added 2026-12-06, not yet timed)

    python examples/real/vit_timm.py --steps 20
    membound diagnose -- python examples/real/vit_timm.py
"""

from __future__ import annotations

import torch
import torch.nn as nn
from _common import (
    StepTimer,
    SyntheticUint8Images,
    add_prefetch_options,
    capture_step,
    note_swapped,
    parse,
    parser,
    pick,
    prefetch_kwargs,
    require,
)

MEAN, STD = (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)  # timm's ViT defaults (inception mean/std)


class SyntheticImages(SyntheticUint8Images):
    """`n` items from a pool of random uint8 CHW images, flipped, scaled and normalized on
    access (what timm's transforms do after decoding and cropping)."""

    def __init__(self, n: int, size: int, num_classes: int, pool: int = 64):
        super().__init__(n, size, num_classes, pool)
        self.mean = torch.tensor(MEAN).view(3, 1, 1)
        self.std = torch.tensor(STD).view(3, 1, 1)

    def __getitem__(self, i: int):
        img, label = super().__getitem__(i)
        return (img.float() / 255.0 - self.mean) / self.std, label


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__, steps=20, warmup=5)
    p.add_argument("--batch-size", type=int, default=None, help="batch size (default 64)")
    p.add_argument("--workers", type=int, default=None, help="DataLoader workers (default 8)")
    p.add_argument("--model", default=None, help="timm model (default vit_base_patch16_224)")
    p.add_argument("--pin-mem", action="store_true", help="DataLoader(pin_memory=True)")
    p.add_argument(
        "--membound-prefetch", action="store_true", help="membound.data.prefetch(loader)"
    )
    add_prefetch_options(p)
    p.add_argument("--swap-norms", action="store_true", help="membound.swap_norms(model)")
    p.add_argument("--compile", action="store_true", help="torch.compile(model)")
    p.add_argument("--fused-optimizer", action="store_true", help="AdamW(fused=True)")
    p.add_argument(
        "--log-every",
        type=int,
        default=1,
        metavar="N",
        help="loss.item() every N steps (default 1)",
    )
    p.add_argument("--cuda-graphs", action="store_true",
                   help="capture the whole step in a CUDA graph and replay it (CUDA only)")  # fmt: skip
    args = parse(p, argv)
    if args.log_every < 1:
        p.error("--log-every must be >= 1")
    if args.cuda_graphs and (not args.cuda or args.compile or args.swap_norms):
        p.error("--cuda-graphs needs --device cuda, and no --compile or --swap-norms")
    timm = require("timm", "vit_timm.py")

    batch = args.batch_size or pick(args, 64, 2)
    size = pick(args, 224, 32)
    workers = args.workers if args.workers is not None else pick(args, 8, 0)
    name = args.model or pick(args, "vit_base_patch16_224", "vit_tiny_patch16_224")
    model_kw = {} if args.cuda else {"img_size": size, "depth": 2}
    model = timm.create_model(name, num_classes=1000, **model_kw).to(args.device)
    timer = StepTimer("vit_timm", args)
    norms = sum(isinstance(m, nn.LayerNorm) for m in model.modules())
    timer.extra = {"batch": batch, "workers": workers, "model": name, "norms": norms,
                   "timm": timm.__version__}  # fmt: skip
    if args.swap_norms:
        import membound

        membound.swap_norms(model)
        note_swapped(model, timer, norms, "LayerNorms")
    if args.compile:
        model = torch.compile(model)

    dataset = SyntheticImages(batch * (timer.total_steps + 2), size, 1000)
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=batch,
        shuffle=True,
        num_workers=workers,
        pin_memory=args.pin_mem,
        drop_last=True,
        persistent_workers=workers > 0,
    )
    if args.membound_prefetch:
        import membound.data

        loader = membound.data.prefetch(loader, args.device, **prefetch_kwargs(args))
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    # capturable: AdamW's step counters stay on the GPU, which a captured step needs
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=1e-3,
        weight_decay=0.05,
        capturable=args.cuda_graphs,
        fused=True if args.fused_optimizer else None,
    )
    amp = torch.autocast(device_type="cuda" if args.cuda else "cpu", dtype=torch.bfloat16)

    model.train()
    graph = None
    for i, (inputs, target) in enumerate(loader):
        inputs = inputs.to(args.device, non_blocking=True)
        target = target.to(args.device, non_blocking=True)
        if args.cuda_graphs:  # the fix: the batch into the graph's inputs, one replay
            if graph is None:
                static_in, static_target = inputs.clone(), target.clone()

                def step(static_in=static_in, static_target=static_target):
                    with amp:
                        out = criterion(model(static_in), static_target)
                    out.backward()
                    optimizer.step()
                    return out

                graph, loss = capture_step(
                    step, before=lambda: optimizer.zero_grad(set_to_none=True)
                )
            static_in.copy_(inputs)
            static_target.copy_(target)
            graph.replay()
        else:
            with amp:
                output = model(inputs)
                loss = criterion(output, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if i % args.log_every == 0:
            loss_value = loss.item()  # the AverageMeter update
            if i % 10 == 0:
                print(f"step {i}: loss {loss_value:.4f}", flush=True)
        timer.step()
        if timer.done:
            break
    return timer.report()


if __name__ == "__main__":
    main()
