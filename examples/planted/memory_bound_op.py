"""Planted `memory-bound-op`: a wide bf16 softmax dominates the step.

An output head projects 32768 tokens from 128 features to a 16384-wide vocabulary and takes
the softmax: the logits are 1 GiB of bf16, and softmax forward (read + write) and backward
(read two, write one) move ~5 GiB per step while the skinny GEMMs around them move far less.
Almost all GPU time is one op left of the ridge. bf16 storage throughout, and a GEMM on each
side of the softmax, so neither `fp32-storage` nor `unfused-chain` applies.
"""

import torch
from _common import StepTimer, pick, setup

args = setup(__doc__)
dev, dt = args.device, torch.bfloat16
tokens, features, vocab = pick(args, (32768, 128, 16384), (64, 16, 128))
head = torch.nn.Linear(features, vocab, bias=False).to(dev, dt)
opt = torch.optim.SGD(head.parameters(), lr=1e-4)
h = torch.randn(tokens, features, device=dev, dtype=dt)
grad_out = torch.randn(tokens, vocab, device=dev, dtype=dt)

timer = StepTimer("memory-bound-op")
for _ in range(args.steps):
    opt.zero_grad(set_to_none=True)
    probs = torch.softmax(head(h), dim=-1)  # the planted op
    probs.backward(grad_out)
    opt.step()
    timer.step(probs[0, :4])
timer.done()
