"""Planted straggler: DDP where one rank sleeps before every step.

Every rank computes the same small MLP step; rank `--straggler` (default the last) sleeps
`--sleep-ms` first, so at the gradient all-reduce the other ranks wait for it that long.
`membound diagnose --nproc-per-node 2 -- examples/distributed/straggler.py` should name that
rank as the straggler, holding the others back by about `--sleep-ms` per step.
Runs on GPUs with NCCL, or on CPU with gloo (`--width 64` keeps it small there).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _ddp import setup, teardown  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--sleep-ms", type=float, default=20.0)
    p.add_argument("--straggler", type=int, default=-1, help="rank that sleeps (-1: the last)")
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--batch", type=int, default=256)
    a = p.parse_args()

    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world, device = setup()
    late = a.straggler % world
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(a.width, a.width), torch.nn.ReLU(), torch.nn.Linear(a.width, a.width)
    ).to(device)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    x = torch.randn(a.batch, a.width, device=device)
    for _ in range(a.steps):
        if rank == late:
            time.sleep(a.sleep_ms / 1e3)  # the planted straggler: host work nobody else has
        loss = ddp(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        # logging the loss, as training loops do; it also keeps each rank's host in step
        # with its GPU, so a step's collectives fall inside that step's window
        loss.item()
    if device.type == "cuda":
        torch.cuda.synchronize()
    teardown()


if __name__ == "__main__":
    main()
