"""Planted `launch-bound`: hundreds of tiny elementwise kernels per step on small tensors.

A 24-layer "model" whose layers are h = tanh(h * w + b) on a 64 x 64 tensor: ~70 forward and
~150 backward kernels of a few microseconds each, while the host needs ~10 us to launch each
one, so the GPU sits idle between launches most of the step.
"""

import torch
from _common import StepTimer, setup

DEPTH, WIDTH = 24, 64


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(WIDTH))
        self.b = torch.nn.Parameter(torch.zeros(WIDTH))

    def forward(self, h):
        return torch.tanh(h * self.w + self.b)


def build(dev):
    """The model, its SGD optimizer and the input (launch_bound_graphed.py reuses them)."""
    model = torch.nn.Sequential(*[Tiny() for _ in range(DEPTH)]).to(dev)
    return model, torch.optim.SGD(model.parameters(), lr=1e-3), torch.randn(64, WIDTH, device=dev)


if __name__ == "__main__":
    args = setup(__doc__, default_steps=24)
    model, opt, x = build(args.device)
    timer = StepTimer("launch-bound")
    for _ in range(args.steps):
        opt.zero_grad(set_to_none=True)
        loss = model(x).mean()
        loss.backward()
        opt.step()
        timer.step(loss)
    timer.done()
