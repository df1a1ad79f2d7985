"""Planted `blocking-copy`: a pinned 154 MB batch copied on the compute stream each step.

256 x 3 x 224 x 224 float32 from pinned memory, `.to(device, non_blocking=True)` on the default
stream right before the forward pass: the host does not block, but the GPU cannot start the
step until the copy (~3 ms at ~55 GB/s) is done, and nothing overlaps it — the next batch is
not copied on a side stream while this one computes (~0.5 ms of compute).
"""

import torch
import torch.nn.functional as F
from _common import StepTimer, pick, setup

args = setup(__doc__)
dev = args.device
batch, size = pick(args, (256, 224), (4, 32))
batches = [torch.randn(batch, 3, size, size) for _ in range(2)]
if args.cuda:
    batches = [b.pin_memory() for b in batches]  # pinned: the copy is truly asynchronous
labels = torch.randint(0, 10, (batch,), device=dev)
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 8, stride=8),
    torch.nn.ReLU(),
    torch.nn.AdaptiveAvgPool2d(1),
    torch.nn.Flatten(),
    torch.nn.Linear(16, 10),
).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)

timer = StepTimer("blocking-copy")
for step in range(args.steps):
    images = batches[step % 2].to(dev, non_blocking=True)  # the planted copy, same stream
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    opt.step()
    timer.step(loss)
timer.done()
