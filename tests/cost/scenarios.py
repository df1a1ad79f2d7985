"""Deterministic op sequences run both live (CostCounter) and under the profiler.

`record_fixture.py` records them to `trace_args.json.gz`; the tests replay them live and
compare each op's post-hoc cost (from the recorded args) with its live cost.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def mlp_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 128), nn.LayerNorm(128), nn.GELU())


def mlp_forward_backward() -> None:
    model = mlp_model()
    x = torch.randn(32, 64, requires_grad=True)
    model(x).sum().backward()


def assorted_ops() -> None:
    torch.manual_seed(0)
    a = torch.randn(32, 128)
    b = torch.randn(128)
    z = a + b
    z.add_(b)
    _ = a * 2.0
    _ = torch.relu(a), F.silu(a), torch.sigmoid(a), torch.tanh(a), torch.exp(a)
    _ = a - b, a / b, torch.where(a > 0, a, b)
    _ = F.softmax(a, -1), F.log_softmax(a, dim=1)
    _ = a.sum(), a.sum(dim=1), a.mean(-1, keepdim=True), a.var(dim=0)
    q, k, v = (torch.randn(2, 4, 16, 8) for _ in range(3))
    _ = F.scaled_dot_product_attention(q, k, v)
    _ = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    img = torch.randn(2, 3, 10, 10)
    w = torch.randn(8, 3, 3, 3)
    y = F.conv2d(img, w, torch.randn(8), stride=2, padding=1)
    _ = F.group_norm(y, 2, torch.ones(8), torch.zeros(8))
    _ = F.batch_norm(y, torch.zeros(8), torch.ones(8), torch.ones(8), torch.zeros(8), training=True)
    table = torch.randn(100, 16)
    idx = torch.arange(28).reshape(4, 7) % 100
    _ = F.embedding(idx, table)
    _ = a.to(torch.bfloat16), a.clone()
    torch.empty_like(a).copy_(a)
    _ = F.cross_entropy(a, torch.arange(32) % 128)
    _ = torch.bmm(torch.randn(3, 4, 5), torch.randn(3, 5, 6))
    _ = torch.baddbmm(torch.randn(3, 4, 6), torch.randn(3, 4, 5), torch.randn(3, 5, 6))
    _ = torch.mm(a, torch.randn(128, 16))
    _ = torch.cat([a, a])
    if hasattr(F, "rms_norm"):
        _ = F.rms_norm(a, (128,), torch.ones(128))


def assorted_backward() -> None:
    torch.manual_seed(0)
    emb, conv = nn.Embedding(50, 16), nn.Conv2d(3, 4, 3, padding=1)
    bn, gn = nn.BatchNorm2d(4), nn.GroupNorm(2, 4)
    h = emb(torch.arange(24).reshape(2, 12) % 50)  # (2, 12, 16)
    q = h.view(2, 12, 2, 8).transpose(1, 2)  # (2, 2, 12, 8)
    a = F.scaled_dot_product_attention(q, q * 0.5, q, is_causal=True)
    logits = a.transpose(1, 2).reshape(24, 16)
    s, ls = F.softmax(logits, -1), F.log_softmax(logits, -1)
    loss = F.cross_entropy(logits, torch.arange(24) % 16) + (s * ls).sum()
    y = gn(bn(conv(torch.randn(2, 3, 8, 8))))
    loss = loss + F.silu(y).mean() + torch.tanh(y).sum()
    loss.backward()


SCENARIOS = {"mlp": mlp_forward_backward, "assorted": assorted_ops, "backward": assorted_backward}
