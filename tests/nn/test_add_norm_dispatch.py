"""The adaptive dispatch of add_norm on CUDA (eager ops while the GPU waits for the host, the
kernels while work is queued; never a switch with dropout), and its setting."""

from __future__ import annotations

import pytest
import torch

from membound.errors import BadInput
from membound.nn import add_norm_op, functional
from membound.nn.functional import add_norm


def test_dispatch_setting():
    import membound.nn

    assert add_norm_op.DISPATCH == "kernels"  # the default (measured: see DISPATCH)
    try:
        assert membound.nn.set_add_norm_dispatch("adaptive") == "kernels"
        assert add_norm_op.DISPATCH == "adaptive"
        with pytest.raises(BadInput, match="add_norm dispatch 'fast': use one of"):
            membound.nn.set_add_norm_dispatch("fast")
        assert add_norm_op.DISPATCH == "adaptive"  # a bad mode changes nothing
    finally:
        membound.nn.set_add_norm_dispatch("kernels")


def test_kernels_mode_never_asks_the_gpu(monkeypatch):
    """With "kernels", gpu_idle answers False before touching CUDA (works without a GPU)."""
    monkeypatch.setattr(add_norm_op, "DISPATCH", "kernels")
    assert add_norm_op.gpu_idle(torch.zeros(1)) is False


def test_compiling_never_asks_the_gpu(monkeypatch):
    monkeypatch.setattr(add_norm_op, "DISPATCH", "adaptive")
    monkeypatch.setattr(add_norm_op, "is_compiling", lambda: True)
    assert add_norm_op.gpu_idle(torch.zeros(1)) is False


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _count_eager(monkeypatch):
    calls = []
    real = functional.eager_add_norm

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(functional, "eager_add_norm", counting)
    return calls


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("dropout_p", [0.0, 0.1])
def test_adaptive_follows_the_stream(monkeypatch, dropout_p):
    """Above the size rule: an idle stream takes the eager ops (without dropout), a stream
    with queued work the kernels; with dropout always the kernels (same masks by seed)."""
    monkeypatch.setattr(add_norm_op, "DISPATCH", "adaptive")
    calls = _count_eager(monkeypatch)
    x = torch.randn(4096, 4096, device="cuda", requires_grad=True)  # 2**24 > EAGER_MAX_ELEMS
    w = torch.ones(4096, device="cuda", requires_grad=True)
    torch.cuda.synchronize()
    add_norm(x, w, dropout_p=dropout_p)
    assert len(calls) == (1 if dropout_p == 0.0 else 0)
    a = torch.randn(8192, 8192, device="cuda")
    for _ in range(20):  # ~20 ms of queued GPU work
        a = a @ a * 1e-4
    assert not torch.cuda.current_stream().query()
    add_norm(x, w, dropout_p=dropout_p)
    assert len(calls) == (1 if dropout_p == 0.0 else 0)
    torch.cuda.synchronize()


@pytest.mark.gpu
@needs_cuda
def test_both_paths_agree(monkeypatch):
    """The switch must not change results beyond rounding: eager and kernels on one input."""
    x = torch.randn(2048, 4097, device="cuda")  # 2**23 + 2048 elements: above the size rule
    r = torch.randn_like(x)
    w = torch.randn(4097, device="cuda")
    b = torch.randn(4097, device="cuda")
    monkeypatch.setattr(add_norm_op, "DISPATCH", "kernels")
    y_k = add_norm(x, w, b, residual=r)
    y_e = functional.eager_add_norm(x, w, b, r, None, 0.0, False, 1e-5, x.dtype, x.dtype)[0]
    assert torch.allclose(y_k, y_e, atol=1e-4, rtol=1e-4)
