"""Planted exposed communication: DDP on a large model with almost no compute per step.

A stack of `--layers` Linear(width, width) layers (default 12 × 4096² ≈ 201 M parameters,
805 MB of fp32 gradients, ~2 ms of all-reduce on NVLink) sees a batch of `--batch` rows
(default 1): backward is a few matrix-vector products, so DDP's gradient all-reduce has
nothing to hide behind and the step waits for it. `membound diagnose --nproc-per-node 2 -- examples/distributed/exposed_allreduce.py`
should report `exposed-communication` as the top finding, with the all-reduce bus bandwidth
against the measured GPU<->GPU ceiling. Runs on GPUs with NCCL, or on CPU with gloo
(`--width 64 --layers 2` keeps it small there).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _ddp import setup, teardown  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--batch", type=int, default=1)
    a = p.parse_args()

    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world, device = setup()
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        *[torch.nn.Linear(a.width, a.width, bias=False) for _ in range(a.layers)]
    ).to(device)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-6)
    x = torch.randn(a.batch, a.width, device=device)
    for _ in range(a.steps):
        loss = ddp(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()  # the all-reduce of ~4·width²·layers bytes runs inside, exposed
        opt.step()
        # logging the loss, as training loops do; it also keeps each rank's host in step
        # with its GPU, so a step's collectives fall inside that step's window
        loss.item()
    if device.type == "cuda":
        torch.cuda.synchronize()
    if rank == 0:
        n = sum(p.numel() for p in model.parameters())
        print(f"exposed_allreduce: {n / 1e6:.1f} M parameters, {world} ranks, {a.steps} steps")
    teardown()


if __name__ == "__main__":
    main()
