"""Planted `fp32-storage`: memory-bound norm/activation work on fp32 activations.

An fp32 model (TF32 on, so the GEMMs use tensor cores) on 131072 tokens x 512 features, where
each LayerNorm and GELU (and their backward) moves 256 MB fp32 tensors: a large part of the
step is memory-bound ops running close to their roof, whose bytes bf16 storage would halve.
Each memory-bound op sits between two GEMMs, so no chain of them is fusible: the planted
cost is the storage dtype alone.

Why these choices (from the first H200 recording, 32768 tokens, affine LayerNorm, biases):
- the tensors must be large enough that every kernel runs longer than the host needs to issue
  it (~100 µs per op under the profiler); at 32768 tokens the GPU idled 39% of the step and
  `launch-bound` came first;
- no LayerNorm affine parameters and no Linear biases: their gradients are column reductions
  over all tokens that ran at a quarter of the memory roof — a slow kernel (`memory-bound-op`),
  not a storage cost.
"""

import torch
import torch.nn.functional as F
from _common import StepTimer, pick, setup

args = setup(__doc__)
torch.backends.cuda.matmul.allow_tf32 = True  # keep fp32-matmul out of the picture
torch.backends.cudnn.allow_tf32 = True
dev = args.device
tokens, hidden = pick(args, (131072, 512), (64, 32))


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(hidden, elementwise_affine=False)
        self.up = torch.nn.Linear(hidden, hidden, bias=False)
        self.down = torch.nn.Linear(hidden, hidden, bias=False)

    def forward(self, h):
        # Linear -> LayerNorm -> Linear -> GELU -> Linear: every memory-bound op between GEMMs
        return self.down(F.gelu(self.up(self.norm(h))))


model = torch.nn.Sequential(
    torch.nn.Linear(hidden, hidden, bias=False), *[Block() for _ in range(6)]
).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-4)
x = torch.randn(tokens, hidden, device=dev)
grad_out = torch.randn(tokens, hidden, device=dev) / tokens

timer = StepTimer("fp32-storage")
for _ in range(args.steps):
    opt.zero_grad(set_to_none=True)
    out = model(x)
    out.backward(grad_out)
    opt.step()
    timer.step(out[0, :4])
timer.done()
