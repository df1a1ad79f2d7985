"""Planted `input-starved`: a DataLoader whose per-item CPU transform is slower than the step.

Each item is blurred on the host with a 15 x 15 convolution (a stand-in for heavy decoding or
augmentation) in the main process (num_workers=0), while the GPU needs about a millisecond
per batch: the GPU waits inside DataLoader `__next__` most of the step. Batches are pinned
and small (3 MB), so copies are not the problem.
"""

import torch
import torch.nn.functional as F
from _common import StepTimer, pick, setup
from torch.utils.data import DataLoader, Dataset

args = setup(__doc__)
dev = args.device
size, batch = pick(args, (128, 16), (32, 4))


class BlurredNoise(Dataset):
    def __init__(self, n: int):
        self.n = n
        self.kernel = torch.full((3, 1, 15, 15), 1.0 / 225)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        img = torch.rand(1, 3, size, size, generator=g)
        img = F.conv2d(F.pad(img, (7, 7, 7, 7), mode="reflect"), self.kernel, groups=3)
        return img[0], i % 10


loader = DataLoader(
    BlurredNoise(batch * (args.steps + 1)), batch_size=batch, num_workers=0, pin_memory=args.cuda
)
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 32, 3, stride=2),
    torch.nn.ReLU(),
    torch.nn.AdaptiveAvgPool2d(1),
    torch.nn.Flatten(),
    torch.nn.Linear(32, 10),
).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)

timer = StepTimer("input-starved")
for step, (images, labels) in enumerate(loader):
    if step >= args.steps:
        break
    images = images.to(dev, non_blocking=True)
    labels = labels.to(dev, non_blocking=True)
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    opt.step()
    timer.step(loss)
timer.done()
