"""Planted `fp32-matmul`: large fp32 matmuls with TF32 disabled (no tensor cores).

Two fp32 Linear(4096, 4096) layers on 8192 tokens with `allow_tf32 = False`: ~1.6 TFLOP per
step at the fp32 SIMT rate (~51 TFLOP/s on an H200, ~30 ms) where TF32 or bf16 would run the
same GEMMs 7-14x faster.
"""

import torch
from _common import StepTimer, pick, setup

args = setup(__doc__, default_steps=20)
torch.backends.cuda.matmul.allow_tf32 = False  # the planted mistake
torch.backends.cudnn.allow_tf32 = False
dev = args.device
tokens, hidden = pick(args, (8192, 4096), (64, 64))
model = torch.nn.Sequential(
    torch.nn.Linear(hidden, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden)
).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-4)
x = torch.randn(tokens, hidden, device=dev)
grad_out = torch.randn(tokens, hidden, device=dev) / tokens

timer = StepTimer("fp32-matmul")
for _ in range(args.steps):
    opt.zero_grad(set_to_none=True)
    out = model(x)
    out.backward(grad_out)
    opt.step()
    timer.step(out[0, :4])
timer.done()
