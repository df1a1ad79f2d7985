"""Planted `unfused-chain`: residual add -> dropout -> LayerNorm as three kernels on big bf16.

On 65536 x 4096 bf16 activations (512 MiB each) every link writes its output to HBM and the
next reads it back: forward add -> dropout -> layer_norm, backward layer_norm -> dropout. A
fused kernel (membound.nn.FusedAddLayerNorm) keeps the intermediates on chip.
"""

import torch
import torch.nn.functional as F
from _common import StepTimer, pick, setup

args = setup(__doc__)
dev, dt = args.device, torch.bfloat16
tokens, hidden = pick(args, (65536, 4096), (64, 32))
weight = torch.ones(hidden, device=dev, dtype=dt, requires_grad=True)
bias = torch.zeros(hidden, device=dev, dtype=dt, requires_grad=True)
opt = torch.optim.SGD([weight, bias], lr=1e-4)
x = torch.randn(tokens, hidden, device=dev, dtype=dt, requires_grad=True)
residual = torch.randn(tokens, hidden, device=dev, dtype=dt)
grad_out = torch.randn(tokens, hidden, device=dev, dtype=dt)

timer = StepTimer("unfused-chain")
for _ in range(args.steps):
    opt.zero_grad(set_to_none=True)
    x.grad = None
    h = F.dropout(x + residual, p=0.1, training=True)
    y = F.layer_norm(h, (hidden,), weight, bias)
    y.backward(grad_out)
    opt.step()
    timer.step(y[0, :4])
timer.done()
