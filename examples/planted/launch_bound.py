"""Planted `launch-bound`: hundreds of tiny elementwise kernels per step on small tensors.

A 24-layer "model" whose layers are h = tanh(h * w + b) on a 64 x 64 tensor: ~70 forward and
~150 backward kernels of a few microseconds each, while the host needs ~10 us to launch each
one, so the GPU sits idle between launches most of the step.
"""

import torch
from _common import StepTimer, setup

args = setup(__doc__, default_steps=24)
dev = args.device
depth, width = 24, 64


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(width))
        self.b = torch.nn.Parameter(torch.zeros(width))

    def forward(self, h):
        return torch.tanh(h * self.w + self.b)


model = torch.nn.Sequential(*[Tiny() for _ in range(depth)]).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(64, width, device=dev)

timer = StepTimer("launch-bound")
for _ in range(args.steps):
    opt.zero_grad(set_to_none=True)
    loss = model(x).mean()
    loss.backward()
    opt.step()
    timer.step(loss)
timer.done()
