"""`membound.nn.add_norm_op`: the dispatch rule, the backward taking the forward's path, and the
size rule on the GPU (small inputs run plain PyTorch ops; the kernels from the thresholds on),
plus a seeded module through torch.compile."""

from __future__ import annotations

import pytest
import torch

from membound import _env
from membound.kernels.add_norm.ref import add_norm_bwd_ref, dropout_keep_ref
from membound.nn import add_norm_op

HAS_TRITON = add_norm_op.importlib.util.find_spec("triton") is not None


def test_dispatch_rule(monkeypatch):
    cpu = torch.zeros(2)
    monkeypatch.delenv(_env.DISABLE_TRITON_VAR, raising=False)
    monkeypatch.setenv(_env.TRITON_INTERPRET_VAR, "1")
    assert add_norm_op.use_triton(cpu) == HAS_TRITON
    monkeypatch.setenv(_env.TRITON_INTERPRET_VAR, "0")
    assert not add_norm_op.use_triton(cpu)  # CPU tensors without the interpreter: reference
    monkeypatch.setenv(_env.TRITON_INTERPRET_VAR, "1")
    monkeypatch.setenv(_env.DISABLE_TRITON_VAR, "1")
    assert not add_norm_op.use_triton(cpu)
    monkeypatch.setattr(add_norm_op, "_triton_installed", lambda: False)
    monkeypatch.delenv(_env.DISABLE_TRITON_VAR)
    assert not add_norm_op.use_triton(cpu)  # triton not installed


def test_backward_takes_the_forward_path():
    """The seed tensor carries the forward's path; a backward told 'reference' must run the
    reference (whose dropout stream differs from the kernels')."""
    x = torch.randn(4, 64)
    y, s, mean, rstd, seed = add_norm_op._fwd_impl(
        x, None, None, None, None, 0.5, False, 1e-5, True, x.dtype, x.dtype
    )
    assert seed.shape == (2,) and int(seed[1]) == int(add_norm_op.use_triton(x))
    dy = torch.randn_like(x)
    ref_seed = torch.tensor([int(seed[0]), 0])
    dx = add_norm_op._bwd_impl(dy, None, s, mean, rstd, None, ref_seed, 0.5, False, False,
                               False, False, False, x.dtype, x.dtype, torch.float32)[0]  # fmt: skip
    keep = dropout_keep_ref(int(seed[0]), x.shape, 0.5, x.device)
    want = add_norm_bwd_ref(dy, None, s, mean, rstd, None, keep, is_rms=False, dropout_p=0.5)[1]
    assert torch.allclose(dx, want)


def test_the_custom_ops_wrap_their_bodies():
    """Each custom op's schema comes from its body's annotations (one signature each)."""
    for op, body in ((add_norm_op.add_norm_fwd_op, add_norm_op._fwd_impl),
                     (add_norm_op.add_norm_bwd_op, add_norm_op._bwd_impl)):  # fmt: skip
        schema = str(op._opoverload._schema)
        names = body.__code__.co_varnames[: body.__code__.co_argcount]
        assert all(f" {n}" in schema for n in names), schema
        assert "Tensor? residual" in schema or "Tensor? ds" in schema


# ----------------------------------------------------------------------------- GPU


@pytest.mark.gpu
def test_gpu_seeded_module_reproducible_and_compiles():
    from membound.nn import FusedAddLayerNorm

    m = FusedAddLayerNorm(4096, dropout_p=0.1, prenorm=True, device="cuda", dtype=torch.bfloat16)
    # above EAGER_MAX_ELEMS (2**23): the kernels, whose seed comes from torch's CPU generator
    # (small inputs run plain PyTorch ops, where compiled dropout draws differently, as in
    # PyTorch itself)
    x = torch.randn(4, 520, 4096, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    r = torch.randn_like(x)
    torch.manual_seed(0)
    a, _ = m(x, r)
    torch.manual_seed(0)
    b, _ = m(x, r)
    assert torch.equal(a, b)
    torch._dynamo.reset()
    f = torch.compile(lambda x, r: m(x, r), fullgraph=True)
    f(x, r)  # compile first: compilation must not shift the generator the op draws from
    torch.manual_seed(0)
    y, s = f(x, r)
    assert torch.equal(y, a)
    (y.float().sum() + s.float().sum()).backward()
    assert x.grad is not None and m.weight.grad is not None


@pytest.mark.gpu
def test_gpu_small_inputs_take_plain_eager_ops():
    from membound.kernels import _launch
    from membound.nn.functional import add_norm

    x, r = (torch.randn(8, 1024, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    w = torch.randn(1024, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    before = dict(_launch.stats)
    torch.manual_seed(3)
    y, s = add_norm(x, w, None, residual=r, dropout_p=0.5, prenorm=True)
    torch.manual_seed(3)
    y2, _ = add_norm(x, w, None, residual=r, dropout_p=0.5, prenorm=True)
    assert torch.equal(y, y2) and _launch.stats == before  # no Triton launch
    assert type(y.grad_fn).__name__ != "AddNormFunctionBackward"  # plain autograd ops
    kept = s != r  # dropped elements leave s == residual exactly
    assert 0.4 < kept.float().mean().item() < 0.6
    (gw,) = torch.autograd.grad(y.float().sum(), (w,))
    assert torch.isfinite(gw).all()


@pytest.mark.gpu
def test_gpu_small_inputs_without_grad_take_the_kernels():
    """Inference: the size rule's threshold is lower without grad (EAGER_MAX_ELEMS_NOGRAD):
    from 2**20 elements the fused kernel runs (one launch, no autograd), with the values of
    the eager-ops path; below it the eager ops."""
    from membound.kernels import _launch
    from membound.nn.functional import add_norm, eager_add_norm

    assert add_norm_op.EAGER_MAX_ELEMS_NOGRAD < 256 * 4096 <= add_norm_op.EAGER_MAX_ELEMS
    x, r = (torch.randn(256, 4096, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    w, b = (torch.randn(4096, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    calls = _launch.stats["direct"] + _launch.stats["normal"]
    with torch.no_grad():
        y = add_norm(x, w, b, residual=r, norm="rms")
        y_ref, _ = eager_add_norm(x, w, b, r, None, 0.0, True, 1e-5, x.dtype, x.dtype)
    assert _launch.stats["direct"] + _launch.stats["normal"] == calls + 1
    torch.testing.assert_close(y.float(), y_ref.float(), rtol=2e-2, atol=2e-2)
    with torch.no_grad():
        add_norm(x[:8], w, b, residual=r[:8], norm="rms")  # 32768 elements: eager ops
    assert _launch.stats["direct"] + _launch.stats["normal"] == calls + 1


@pytest.mark.gpu
def test_gpu_strided_rows_and_fp16_large_values():
    from membound.nn.functional import add_norm

    base = (torch.randn(4096, 8192, device="cuda") * 3e4).clamp(-6e4, 6e4).half()
    x = base[:, :4096]  # row stride 8192: no copy
    y = add_norm(x, eps=1e-5)
    ref = torch.nn.functional.layer_norm(x.float(), (4096,))
    assert torch.isfinite(y).all()
    assert (y.float() - ref).abs().max() < 2e-2
