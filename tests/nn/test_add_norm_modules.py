"""FusedAddLayerNorm / FusedAddRMSNorm as drop-ins, and swap_norms."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from membound.errors import BadInput
from membound.nn import FusedAddLayerNorm, FusedAddRMSNorm, swap_norms


def _randomize(m: nn.Module) -> nn.Module:
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn_like(p))
    return m


def test_state_dicts_load_both_ways():
    ln = _randomize(nn.LayerNorm(41, eps=1e-6))
    fused = FusedAddLayerNorm(41, eps=1e-6)
    fused.load_state_dict(ln.state_dict())
    x = torch.randn(3, 41)
    torch.testing.assert_close(fused(x), ln(x), atol=1e-5, rtol=1e-5)
    back = nn.LayerNorm(41, eps=1e-6)
    back.load_state_dict(_randomize(fused).state_dict())
    torch.testing.assert_close(back(x), fused(x), atol=1e-5, rtol=1e-5)
    assert set(FusedAddLayerNorm(8, bias=False).state_dict()) == {"weight"}
    assert set(FusedAddLayerNorm(8, elementwise_affine=False).state_dict()) == set()


@pytest.mark.skipif(not hasattr(nn, "RMSNorm"), reason="torch without nn.RMSNorm")
def test_rms_norm_matches_torch():
    rms = _randomize(nn.RMSNorm(41))
    fused = FusedAddRMSNorm(41)
    fused.load_state_dict(rms.state_dict())
    x = torch.randn(3, 41)
    torch.testing.assert_close(fused(x), rms(x), atol=1e-5, rtol=1e-5)


def test_residual_prenorm_module():
    m = FusedAddLayerNorm(41, prenorm=True, residual_dtype=torch.float32)
    x, r = torch.randn(2, 41).bfloat16(), torch.randn(2, 41)
    y, s = m(x, r)
    assert y.dtype == torch.bfloat16 and s.dtype == torch.float32
    torch.testing.assert_close(s, x.float() + r)


def test_multi_dim_normalized_shape_is_refused():
    with pytest.raises(BadInput, match="last dim"):
        FusedAddLayerNorm((4, 8))


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(41, 41)
        self.ln = nn.LayerNorm(41)
        self.deep = nn.Sequential(nn.Linear(41, 41), nn.LayerNorm(41, bias=False), nn.GELU())
        self.keep = nn.LayerNorm((3, 41))  # two dims: not swappable, must stay
        if hasattr(nn, "RMSNorm"):
            self.rms = nn.RMSNorm(41, eps=1e-6)

    def forward(self, x):
        h = self.deep(self.ln(self.lin(x)))
        h = self.keep(h)
        return self.rms(h) if hasattr(self, "rms") else h


def test_swap_norms_preserves_outputs_and_parameters():
    model = _randomize(_Block()).eval()
    x = torch.randn(2, 3, 41)
    before = model(x)
    params = {id(p) for p in model.parameters()}
    assert swap_norms(model) is model
    assert isinstance(model.ln, FusedAddLayerNorm) and isinstance(model.deep[1], FusedAddLayerNorm)
    assert model.deep[1].bias is None and not model.training
    assert type(model.keep) is nn.LayerNorm
    if hasattr(nn, "RMSNorm"):
        assert isinstance(model.rms, FusedAddRMSNorm) and model.rms.eps == 1e-6
    assert {id(p) for p in model.parameters()} == params  # same Parameter objects
    torch.testing.assert_close(model(x), before, atol=1e-5, rtol=1e-5)
    assert isinstance(swap_norms(nn.LayerNorm(4)), FusedAddLayerNorm)
