"""Planted `pageable-copy`: 38.5 MB fp32 batches copied from pageable memory each step.

64 x 3 x 224 x 224 float32 batches live in ordinary (pageable) host memory and go to the GPU
with `.to(device, non_blocking=True)`, which is silently synchronous from pageable memory:
the host blocks for the whole copy (~5 ms at ~8 GB/s) while the small conv net needs ~1 ms.
"""

import torch
import torch.nn.functional as F
from _common import StepTimer, pick, setup

args = setup(__doc__)
dev = args.device
batch, size = pick(args, (64, 224), (4, 32))
# Two batches made once and reused, so generating data costs nothing per step.
batches = [torch.randn(batch, 3, size, size) for _ in range(2)]  # pageable: no pin_memory()
labels = torch.randint(0, 10, (batch,), device=dev)
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 32, 7, stride=4),
    torch.nn.ReLU(),
    torch.nn.Conv2d(32, 64, 3, stride=2),
    torch.nn.ReLU(),
    torch.nn.AdaptiveAvgPool2d(1),
    torch.nn.Flatten(),
    torch.nn.Linear(64, 10),
).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)

timer = StepTimer("pageable-copy")
for step in range(args.steps):
    images = batches[step % 2].to(dev, non_blocking=True)  # the planted copy
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    opt.step()
    timer.step(loss)
timer.done()
