"""membound.nn.functional.add_norm on both paths (reference, and Triton: interpreter on CPU),
outputs and every gradient through autograd against a float64 reference, plus the dispatch
rule, input errors, torch.compile and autocast."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from membound import _env
from membound.errors import BadInput
from membound.kernels.add_norm.ref import add_norm_ref, dropout_keep_ref
from membound.nn import add_norm_op
from membound.nn.functional import add_norm

HAS_TRITON = add_norm_op.importlib.util.find_spec("triton") is not None
PATHS = [
    pytest.param("ref", id="reference"),
    pytest.param(
        "triton", id="triton", marks=pytest.mark.skipif(not HAS_TRITON, reason="no triton")
    ),
]
TOL = {torch.float32: 2e-4, torch.float16: 1e-2, torch.bfloat16: 5e-2}


@pytest.fixture
def path(request, monkeypatch):
    if request.param == "ref":
        monkeypatch.setenv(_env.DISABLE_TRITON_VAR, "1")
    else:
        monkeypatch.delenv(_env.DISABLE_TRITON_VAR, raising=False)
        # these shapes are small: on CUDA the size rule would send them to the eager composite
        monkeypatch.setattr(add_norm_op, "EAGER_MAX_ELEMS", -1)
        if not torch.cuda.is_available():
            monkeypatch.setenv(_env.TRITON_INTERPRET_VAR, "1")
    return request.param


def _keep(path, seed, M, N, p, device):
    if path == "ref":
        return dropout_keep_ref(seed, (M, N), p, device)
    from membound.kernels.add_norm import dropout_mask

    return dropout_mask(seed, M, N, p, device)


def _next_seed() -> int:
    """The seed the next add_norm call will draw (without consuming it)."""
    state = torch.get_rng_state()
    seed = int(torch.randint(2**62, (1,), dtype=torch.int64).item())
    torch.set_rng_state(state)
    return seed


def _close(got, want, dtype, what):
    assert torch.isfinite(got).all(), what
    err = (got.double() - want.double()).abs().max().item()
    assert err <= TOL[dtype] * max(1.0, want.abs().max().item()), f"{what}: error {err:.3g}"


def _check(path, shape, dtype, norm, parts, p, prenorm, residual_dtype=None):
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    N = shape[-1]
    M = int(torch.tensor(shape[:-1]).prod().item()) if len(shape) > 1 else 1
    mk = {
        "x": lambda: torch.randn(shape),
        "residual": lambda: torch.randn(shape),
        "pre_bias": lambda: 0.5 * torch.randn(N),
        "weight": lambda: 1 + 0.3 * torch.randn(N),
        "bias": lambda: 0.3 * torch.randn(N),
    }
    t = {k: f().to(dev, dtype).requires_grad_() for k, f in mk.items() if k == "x" or k in parts}
    seed = _next_seed()
    out = add_norm(
        t["x"], t.get("weight"), t.get("bias"), residual=t.get("residual"),
        pre_bias=t.get("pre_bias"), dropout_p=p, norm=norm, prenorm=prenorm,
        residual_dtype=residual_dtype,
    )  # fmt: skip
    y, s = out if prenorm else (out, None)
    assert y.shape == t["x"].shape and y.dtype == dtype
    keep = _keep(path, seed, M, N, p, dev).view(shape) if p > 0 else None
    ref = {k: v.detach().double().requires_grad_() for k, v in t.items()}
    yr, sr, _, _ = add_norm_ref(
        ref["x"], ref.get("weight"), ref.get("bias"), ref.get("residual"), ref.get("pre_bias"),
        eps=1e-5, is_rms=norm == "rms", dropout_p=p, keep=keep, compute_dtype=torch.float64,
    )  # fmt: skip
    _close(y, yr, dtype, "y")
    dy = torch.randn(shape).to(dev, dtype)
    loss, loss_r = (y * dy).sum(), (yr * dy.double()).sum()
    if prenorm:
        assert s.dtype == (residual_dtype or dtype)
        _close(s, sr, dtype, "s")
        ds = torch.randn(shape).to(dev, s.dtype)
        loss, loss_r = loss + (s * ds).sum(), loss_r + (sr * ds.double()).sum()
    loss.backward()
    loss_r.backward()
    for k in t:
        assert t[k].grad is not None and t[k].grad.dtype == dtype, k
        _close(t[k].grad, ref[k].grad, dtype, f"d{k}")


ALL = ("residual", "pre_bias", "weight", "bias")


@pytest.mark.parametrize("path", PATHS, indirect=True)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_all_parts_prenorm_dropout(path, dtype, norm):
    _check(path, (3, 5, 41), dtype, norm, ALL, p=0.2, prenorm=True)


@pytest.mark.parametrize("path", PATHS, indirect=True)
@pytest.mark.parametrize(
    "parts",
    [(), ("residual",), ("pre_bias",), ("weight", "bias")],
    ids=lambda p: "+".join(p) or "none",
)
@pytest.mark.parametrize("prenorm", [False, True])
def test_optional_parts(path, parts, prenorm):
    _check(path, (9, 41), torch.float32, "layer", parts, p=0.0, prenorm=prenorm)


@pytest.mark.parametrize("path", PATHS, indirect=True)
def test_fp32_residual_stream_with_bf16_activations(path):
    _check(path, (2, 341), torch.bfloat16, "layer", ALL, 0.1, True, residual_dtype=torch.float32)


@pytest.mark.parametrize("path", PATHS, indirect=True)
@pytest.mark.parametrize("norm", ["layer", "rms"])
@pytest.mark.parametrize("res_dtype", [None, torch.float32], ids=["bf16-stream", "fp32-stream"])
def test_wide_rows_through_autograd(path, norm, res_dtype):
    """9000-wide bf16 rows behind the autograd Function, every part: on the kernel path the
    SM-pair backward (a 16-bit or an fp32 residual stream)."""
    from membound.kernels.add_norm.config import bwd_config

    assert bwd_config(2, 9000).pair
    _check(path, (2, 9000), torch.bfloat16, norm, ALL, 0.1, True, residual_dtype=res_dtype)


@pytest.mark.parametrize("path", PATHS, indirect=True)
def test_parameter_grads_come_in_each_parameters_dtype(path):
    """weight bf16, bias fp32, pre_bias fp16 next to fp32 activations: each gradient in its
    parameter's dtype (one reduction launch writes all three on the kernel path), values
    against float64 autograd."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(7, 300, generator=g, requires_grad=True)
    r = torch.randn(7, 300, generator=g, requires_grad=True)
    w = (1 + 0.3 * torch.randn(300, generator=g)).bfloat16().requires_grad_()
    b = (0.3 * torch.randn(300, generator=g)).requires_grad_()
    pb = (0.5 * torch.randn(300, generator=g)).half().requires_grad_()
    y = add_norm(x, w, b, residual=r, pre_bias=pb)
    dy = torch.randn(7, 300, generator=g)
    (y * dy).sum().backward()
    ref = [t.detach().double().requires_grad_() for t in (x, r, w, b, pb)]
    yr = add_norm_ref(ref[0], ref[2], ref[3], ref[1], ref[4], eps=1e-5, is_rms=False,
                      compute_dtype=torch.float64)[0]  # fmt: skip
    (yr * dy.double()).sum().backward()
    for t, tr, name in zip((x, r, w, b, pb), ref, ("x", "r", "w", "b", "pb"), strict=False):
        assert t.grad.dtype == t.dtype, name
        _close(t.grad, tr.grad, t.dtype, f"d{name}")


@pytest.mark.parametrize("path", PATHS, indirect=True)
def test_manual_seed_reproduces_and_eval_disables_dropout(path):
    x = torch.randn(4, 41)
    torch.manual_seed(5)
    a = add_norm(x, dropout_p=0.5)
    torch.manual_seed(5)
    b = add_norm(x, dropout_p=0.5)
    c = add_norm(x, dropout_p=0.5)
    assert torch.equal(a, b) and not torch.equal(a, c)
    ev = add_norm(x, dropout_p=0.5, training=False)
    torch.testing.assert_close(ev, torch.nn.functional.layer_norm(x, (41,)), atol=1e-5, rtol=1e-5)


def test_import_does_not_import_triton():
    code = "import sys, membound.nn, membound.nn.functional; print('triton' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        (dict(x=torch.ones(2, 3, dtype=torch.int32)), "dtype"),
        (dict(x=torch.ones(2, 3), residual=torch.ones(2, 4)), "shape"),
        (dict(x=torch.ones(2, 3), weight=torch.ones(4)), "shape"),
        (dict(x=torch.ones(2, 3), norm="batch"), "norm"),
        (dict(x=torch.ones(2, 3), dropout_p=1.5), "dropout_p"),
        (dict(x=torch.ones(2, 3), out_dtype=torch.int8), "out_dtype"),
        (dict(x=torch.ones(2, 3), residual=torch.ones(2, 3, device="meta")), "device"),
    ],
)
def test_clear_errors(kwargs, needle):
    x = kwargs.pop("x")
    with pytest.raises(BadInput, match=needle):
        add_norm(x, **kwargs)


def test_zero_rows_and_width_one():
    assert add_norm(torch.ones(0, 8)).shape == (0, 8)
    y = add_norm(torch.randn(3, 1), torch.ones(1), torch.full((1,), 0.5))
    torch.testing.assert_close(y, torch.full((3, 1), 0.5))


def test_autocast_cpu_bf16():
    lin = torch.nn.Linear(41, 41)
    w = torch.ones(41, requires_grad=True)
    x = torch.randn(4, 41)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = lin(x)
        y = add_norm(h, w, residual=h.detach().float().to(torch.bfloat16))
    assert y.dtype == torch.bfloat16
    y.float().sum().backward()
    assert w.grad.dtype == torch.float32 and lin.weight.grad is not None


@pytest.mark.parametrize("path", PATHS, indirect=True)
def test_torch_compile_fullgraph(path):
    from membound.nn import FusedAddLayerNorm

    torch._dynamo.reset()
    m = FusedAddLayerNorm(41, dropout_p=0.1, prenorm=True)
    f = torch.compile(lambda x, r: m(x, r), fullgraph=True, backend="aot_eager")
    x = torch.randn(3, 41, requires_grad=True)
    r = torch.randn(3, 41)
    f(x, r)  # compile first
    torch.manual_seed(0)
    y, s = f(x, r)
    (y.sum() + s.sum()).backward()
    torch.manual_seed(0)
    y2, s2 = m(x, r)
    torch.testing.assert_close(y, y2)
    assert x.grad is not None and m.weight.grad is not None


@pytest.mark.parametrize("path", PATHS, indirect=True)
@pytest.mark.parametrize("prenorm", [False, True])
def test_custom_ops_pass_opcheck(path, prenorm):
    """Schema, fake (meta) implementations and autograd registration of both custom ops.
    Dropout off: opcheck compares repeated runs, and a fresh seed per call would differ."""
    x = torch.randn(3, 41, requires_grad=True)
    r = torch.randn(3, 41, requires_grad=True)
    w = torch.randn(41, requires_grad=True)
    b = torch.randn(41, requires_grad=True)
    args = (x, r, None, w, b, 0.0, False, 1e-5, True, torch.float32, torch.float32)
    torch.library.opcheck(add_norm_op.add_norm_fwd_op, args)
    y, s, mean, rstd, seed = add_norm_op.add_norm_fwd_op(*args)
    dy = torch.randn(3, 41)
    ds = torch.randn(3, 41) if prenorm else None
    bwd_args = (dy, ds, s.detach(), mean, rstd, w.detach(), seed, 0.0, False, True, True, True,
                False, torch.float32, torch.float32, torch.float32)  # fmt: skip
    torch.library.opcheck(add_norm_op.add_norm_bwd_op, bwd_args)
    # the custom op's autograd (used under torch.compile) equals the eager Function's
    gx, gw = torch.autograd.grad((y * dy).sum() + ((s * ds).sum() if prenorm else 0), (x, w))
    y2, s2, *_ = add_norm_op.AddNormFunction.apply(*args)
    gx2, gw2 = torch.autograd.grad((y2 * dy).sum() + ((s2 * ds).sum() if prenorm else 0), (x, w))
    torch.testing.assert_close(gx, gx2)
    torch.testing.assert_close(gw, gw2)


def test_compiled_without_dropout_traces_plain_ops_inductor_can_fuse():
    """Under torch.compile without dropout the norm is traced as plain PyTorch ops, not the
    opaque custom op (add_norm_op.COMPILE_DISPATCH: on the H200 the custom op made a compiled
    GPT-2 42% slower); with dropout, or with COMPILE_DISPATCH "kernels", the custom op."""
    from membound.nn import FusedAddLayerNorm

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(str(gm.graph))
        return gm.forward

    def traced(m):
        graphs.clear()
        torch._dynamo.reset()
        f = torch.compile(lambda x, r: m(x, r), fullgraph=True, backend=backend)
        x, r = torch.randn(3, 41, requires_grad=True), torch.randn(3, 41)
        y, s = f(x, r)
        y2, s2 = m(x, r)
        if m.dropout_p == 0.0:
            torch.testing.assert_close(y, y2)
            torch.testing.assert_close(s, s2)
        return " ".join(graphs)

    plain = traced(FusedAddLayerNorm(41, prenorm=True))
    assert "membound" not in plain and "layer_norm" in plain
    assert "membound.add_norm_fwd" in traced(FusedAddLayerNorm(41, dropout_p=0.1, prenorm=True))
    previous = add_norm_op.COMPILE_DISPATCH
    add_norm_op.COMPILE_DISPATCH = "kernels"
    try:
        assert "membound.add_norm_fwd" in traced(FusedAddLayerNorm(41, prenorm=True))
    finally:
        add_norm_op.COMPILE_DISPATCH = previous
