"""Not a planted bottleneck: a small bf16 transformer-style MLP block, for the roofline join.

Linear(1024, 4096) -> LayerNorm -> GELU -> Linear(4096, 1024) in bf16 on 4096 tokens: a short
trace with GEMMs, a norm and an activation (forward and backward) whose recorded shapes the
cost model turns into FLOPs and bytes.
"""

import torch
from _common import StepTimer, pick, setup

args = setup(__doc__, default_steps=20)
dev, dt = args.device, torch.bfloat16
tokens, d_model, d_ff = pick(args, (4096, 1024, 4096), (32, 16, 64))
model = torch.nn.Sequential(
    torch.nn.Linear(d_model, d_ff),
    torch.nn.LayerNorm(d_ff),
    torch.nn.GELU(),
    torch.nn.Linear(d_ff, d_model),
).to(dev, dt)
opt = torch.optim.SGD(model.parameters(), lr=1e-4)
x = torch.randn(tokens, d_model, device=dev, dtype=dt)

timer = StepTimer("small-block")
for _ in range(args.steps):
    opt.zero_grad(set_to_none=True)
    loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    timer.step(loss)
timer.done()
