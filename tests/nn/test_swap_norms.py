"""swap_norms recognises a norm by what it computes, checks it on a probe, and says what it
did (issue 15: it swapped none of a transformers Llama's 17 LlamaRMSNorm, none of a timm ViT's
LayerNorms)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from membound.nn import FusedAddLayerNorm, FusedAddRMSNorm, swap_norms


class LlamaStyleRMSNorm(nn.Module):
    """Written the way Hugging Face writes LlamaRMSNorm: its own class, `variance_epsilon`,
    fp32 statistics, the weight applied in the input's dtype."""

    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        dtype = hidden_states.dtype
        h = hidden_states.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * h.to(dtype)


class TimmStyleLayerNorm(nn.LayerNorm):
    """timm's LayerNorm: an nn.LayerNorm subclass with its own forward."""

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class ScaleNorm(nn.Module):
    """Has a 1-D weight and an eps, computes something else (no mean, an L2 scale)."""

    def __init__(self, hidden, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x):
        return self.weight * x / (x.norm(dim=-1, keepdim=True) + self.eps)


class Net(nn.Module):
    def __init__(self, hidden=48):
        super().__init__()
        self.inp = nn.Linear(hidden, hidden)
        self.llama = LlamaStyleRMSNorm(hidden)
        self.timm = TimmStyleLayerNorm(hidden)
        self.scale = ScaleNorm(hidden)
        self.bn = nn.BatchNorm1d(3)
        self.wide = nn.LayerNorm((3, hidden))

    def forward(self, x):
        x = self.timm(self.llama(self.inp(x)))
        return self.wide(self.bn(self.scale(x)))


def _randomize(model):
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.5 + 1.0)
    return model


def test_norms_recognised_by_what_they_compute():
    model = _randomize(Net()).eval()
    x = torch.randn(2, 3, 48)
    before = model(x)
    params = {id(p) for p in model.parameters()}
    report = []
    assert swap_norms(model, report=report) is model
    assert isinstance(model.llama, FusedAddRMSNorm) and model.llama.eps == 1e-6
    assert isinstance(model.timm, FusedAddLayerNorm) and model.timm.bias is not None
    assert type(model.scale) is ScaleNorm and type(model.bn) is nn.BatchNorm1d
    assert type(model.wide) is nn.LayerNorm
    assert {id(p) for p in model.parameters()} == params  # the same Parameter objects
    torch.testing.assert_close(model(x), before, atol=1e-5, rtol=1e-5)
    by = {s.name: s for s in report}
    assert by["llama"].swapped and "rms" in by["llama"].why
    assert by["timm"].swapped and by["timm"].kind == "TimmStyleLayerNorm"
    assert not by["scale"].swapped and "differs" in by["scale"].why
    assert not by["bn"].swapped and "batch" in by["bn"].why
    assert not by["wide"].swapped
    assert "inp" not in by  # a Linear is not norm-like: not even reported


def test_swapping_twice_changes_nothing_and_a_norm_model_is_replaced():
    model = _randomize(Net()).eval()
    swap_norms(model)
    again = []
    swap_norms(model, report=again)
    assert all(s.name not in ("llama", "timm") for s in again)
    assert isinstance(swap_norms(LlamaStyleRMSNorm(16)), FusedAddRMSNorm)


def test_a_bf16_llama_norm_is_checked_in_its_own_dtype():
    norm = _randomize(LlamaStyleRMSNorm(64)).to(torch.bfloat16)
    report = []
    new = swap_norms(norm, report=report)
    assert isinstance(new, FusedAddRMSNorm) and report[0].swapped
    x = torch.randn(8, 64, dtype=torch.bfloat16)
    torch.testing.assert_close(new(x), norm(x), atol=2e-2, rtol=2e-2)


def test_probing_leaves_the_programs_random_state_alone():
    model = Net()
    torch.manual_seed(1)
    want = torch.rand(3)
    torch.manual_seed(1)
    swap_norms(model)
    assert torch.equal(torch.rand(3), want)
