"""Healthy: a GEMM-bound bf16 MLP training loop, no planted bottleneck.

Four bf16 Linear(4096, 4096) + ReLU layers on 16384 tokens: ~6.6 TFLOP per step of tensor-core
GEMMs (~10 ms on an H200), data already on the GPU, one loss read per step. membound should
report no finding above 10% of the step.
"""

import torch
from _common import StepTimer, pick, setup

args = setup(__doc__)
dev, dt = args.device, torch.bfloat16
tokens, hidden = pick(args, (16384, 4096), (64, 64))
layers = []
for _ in range(4):
    layers += [torch.nn.Linear(hidden, hidden), torch.nn.ReLU()]
model = torch.nn.Sequential(*layers).to(dev, dt)
opt = torch.optim.SGD(model.parameters(), lr=1e-4)
x = torch.randn(tokens, hidden, device=dev, dtype=dt)
grad_out = torch.randn(tokens, hidden, device=dev, dtype=dt) / tokens

timer = StepTimer("healthy")
for _ in range(args.steps):
    opt.zero_grad(set_to_none=True)
    out = model(x)
    out.backward(grad_out)
    opt.step()
    timer.step(out[0, :4])
timer.done()
