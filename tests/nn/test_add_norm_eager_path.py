"""The small-input path `eager_add_norm` (plain PyTorch ops, autograd backward): same values
as the reference, dropout semantics of F.dropout, dtypes as add_norm promises."""

from __future__ import annotations

import pytest
import torch

from membound.kernels.add_norm.ref import add_norm_ref
from membound.nn.functional import add_norm, eager_add_norm


def _inputs(dtype, wdtype, M=6, N=40):
    g = torch.Generator().manual_seed(7)
    x, r = (torch.randn(M, N, generator=g).to(dtype) for _ in range(2))
    w = (1 + 0.3 * torch.randn(N, generator=g)).to(wdtype)
    b = (0.3 * torch.randn(N, generator=g)).to(wdtype)
    pb = (0.5 * torch.randn(N, generator=g)).to(wdtype)
    return x, r, w, b, pb


@pytest.mark.parametrize("is_rms", [False, True], ids=["layer", "rms"])
@pytest.mark.parametrize(
    "dtype,wdtype", [(torch.float32, torch.float32), (torch.bfloat16, torch.float32),
                     (torch.bfloat16, torch.bfloat16)]
)  # fmt: skip
def test_matches_reference_without_dropout(is_rms, dtype, wdtype):
    x, r, w, b, pb = _inputs(dtype, wdtype)
    y, s = eager_add_norm(x, w, b, r, pb, 0.0, is_rms, 1e-5, torch.float32, dtype)
    yr, sr, _, _ = add_norm_ref(
        x.double(), w.double(), b.double(), r.double(), pb.double(), eps=1e-5, is_rms=is_rms,
        compute_dtype=torch.float64,
    )  # fmt: skip
    assert y.dtype == dtype and s.dtype == torch.float32
    tol = 2e-4 if dtype == torch.float32 and wdtype == torch.float32 else 5e-2
    assert (s.double() - sr).abs().max() <= tol * 4
    assert (y.double() - yr).abs().max() <= tol * max(1.0, yr.abs().max().item())


def test_dropout_keep_rate_scale_and_gradients():
    torch.manual_seed(0)
    x = (torch.rand(64, 256) + 1).requires_grad_()  # strictly positive: 0 means dropped
    r = torch.zeros(64, 256, requires_grad=True)
    y, s = eager_add_norm(x, None, None, r, None, 0.25, False, 1e-5, torch.float32, x.dtype)
    kept = s != 0
    assert abs(kept.float().mean().item() - 0.75) < 0.02
    torch.testing.assert_close(s[kept], x.detach()[kept] / 0.75)
    gx, gr = torch.autograd.grad(s.sum(), (x, r))  # autograd through F.dropout
    torch.testing.assert_close(gx, kept.float() / 0.75)
    torch.testing.assert_close(gr, torch.ones_like(gr))


def test_add_norm_cpu_still_takes_the_reference_path(monkeypatch):
    """The size rule is CUDA-only: on CPU add_norm must not call eager_add_norm."""
    import membound.nn.functional as fn

    def boom(*a, **k):
        raise AssertionError("eager path on CPU")

    monkeypatch.setattr(fn, "eager_add_norm", boom)
    x = torch.randn(4, 32)
    y = add_norm(x, dropout_p=0.0)
    torch.testing.assert_close(y, torch.nn.functional.layer_norm(x, (32,), eps=1e-5))
