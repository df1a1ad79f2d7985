"""Planted `host-sync`: `.item()` after every layer, then host-side bookkeeping.

A 12-layer bf16 MLP that checks each activation for overflow with `.item()` and updates a
running statistic in Python before launching the next layer: every check drains the GPU
queue, and the GPU then waits while the host returns, does its bookkeeping and relaunches.
"""

import math

import torch
from _common import StepTimer, pick, setup

args = setup(__doc__)
dev, dt = args.device, torch.bfloat16
tokens, hidden = pick(args, (8192, 2048), (32, 32))
layers = torch.nn.ModuleList(torch.nn.Linear(hidden, hidden) for _ in range(12)).to(dev, dt)
opt = torch.optim.SGD(layers.parameters(), lr=1e-4)
x = torch.randn(tokens, hidden, device=dev, dtype=dt)
history: list[float] = []


def bookkeeping(value: float) -> float:
    """Host work between the sync and the next launch (a smoothed statistic, ~0.2 ms)."""
    history.append(value)
    return sum(math.sqrt(abs(value) + i) for i in range(2000)) / 2000


timer = StepTimer("host-sync")
for _ in range(args.steps):
    opt.zero_grad(set_to_none=True)
    h = x
    for layer in layers:
        h = layer(h)
        peak = h.abs().amax().item()  # the planted sync: one per layer
        if not math.isfinite(peak):
            raise FloatingPointError("activation overflow")
        bookkeeping(peak)
    loss = h.float().pow(2).mean()
    loss.backward()
    opt.step()
    timer.step(loss)
timer.done()
