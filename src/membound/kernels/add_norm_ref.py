"""Pure-PyTorch reference of add_norm (same semantics as the kernels in `add_norm.py`).

Used by the tests (with float64 math) and as the fallback when Triton cannot run (no CUDA, no
triton, or MEMBOUND_DISABLE_TRITON=1); it never imports triton.
"""

from __future__ import annotations

import torch


def dropout_keep_ref(seed: int, shape, p: float, device) -> torch.Tensor:
    """Keep-mask of the pure-PyTorch path: a function of (seed, shape) through a private
    CPU generator, so its backward regenerates it too (not the kernels' Philox stream)."""
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    return (torch.rand(tuple(shape), generator=gen) >= p).to(device)


def add_norm_ref(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    pre_bias: torch.Tensor | None,
    *,
    eps: float,
    is_rms: bool,
    dropout_p: float = 0.0,
    keep: torch.Tensor | None = None,
    compute_dtype: torch.dtype = torch.float32,
    s_dtype: torch.dtype | None = None,
    out_dtype: torch.dtype | None = None,
):
    """Differentiable reference: (y, s, mean, rstd) with math in `compute_dtype` (float64 in
    tests). `keep` is the dropout keep-mask (required when dropout_p > 0)."""
    s = x.to(compute_dtype)
    if pre_bias is not None:
        s = s + pre_bias.to(compute_dtype)
    if dropout_p > 0.0:
        scale = 0.0 if dropout_p >= 1.0 else 1.0 / (1.0 - dropout_p)
        s = torch.where(keep, s * scale, torch.zeros((), dtype=compute_dtype, device=s.device))
    if residual is not None:
        s = s + residual.to(compute_dtype)
    if is_rms:
        mean = torch.zeros(s.shape[:-1], dtype=compute_dtype, device=s.device)
        var = (s * s).mean(dim=-1)
    else:
        mean = s.mean(dim=-1)
        var = ((s - mean[..., None]) ** 2).mean(dim=-1)
    rstd = torch.rsqrt(var + eps)
    y = (s - mean[..., None]) * rstd[..., None]
    if weight is not None:
        y = y * weight.to(compute_dtype)
    if bias is not None:
        y = y + bias.to(compute_dtype)
    y = y.to(out_dtype or x.dtype) if compute_dtype != torch.float64 else y
    s_out = s.to(s_dtype or x.dtype) if compute_dtype != torch.float64 else s
    return y, s_out, mean.float(), rstd.float()


def add_norm_bwd_ref(
    dy: torch.Tensor,
    ds: torch.Tensor | None,
    src: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight: torch.Tensor | None,
    keep: torch.Tensor | None,
    *,
    is_rms: bool,
    dropout_p: float = 0.0,
):
    """The kernels' backward formulas in fp32 PyTorch: (ds_total, dx, dweight, dbias, dpre_bias)
    as fp32, for the fallback path (inputs 2-D)."""
    s = src.float()
    xhat = s * rstd[:, None] if is_rms else (s - mean[:, None]) * rstd[:, None]
    d = dy.float()
    g = d * weight.float() if weight is not None else d
    c_gx = (g * xhat).mean(dim=-1, keepdim=True)
    if is_rms:
        dsum = (g - xhat * c_gx) * rstd[:, None]
    else:
        dsum = (g - g.mean(dim=-1, keepdim=True) - xhat * c_gx) * rstd[:, None]
    if ds is not None:
        dsum = dsum + ds.float()
    dx = dsum
    if dropout_p > 0.0:
        scale = 0.0 if dropout_p >= 1.0 else 1.0 / (1.0 - dropout_p)
        dx = torch.where(keep, dsum * scale, torch.zeros((), device=dsum.device))
    return dsum, dx, (d * xhat).sum(dim=0), d.sum(dim=0), dx.sum(dim=0)
