"""Pure-PyTorch reference of add_norm (same semantics as the kernels of this package).

Used by the tests (with float64 math) and as the fallback when Triton cannot run (no CUDA, no
triton, or MEMBOUND_DISABLE_TRITON=1); it never imports triton.
"""

from __future__ import annotations

import torch


def dropout_keep_ref(seed: int, shape, p: float, device) -> torch.Tensor:
    """Keep-mask of the pure-PyTorch path: a function of (seed, shape, device type) through a
    private generator on that device (no host-to-device copy, no sync), so its backward
    regenerates it too. Not the kernels' Philox stream: each call of add_norm takes one path
    for forward and backward (see membound.nn.add_norm_op)."""
    device = torch.device(device)
    gen = torch.Generator(device=device).manual_seed(int(seed))
    return torch.rand(tuple(shape), generator=gen, device=device) >= p


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


_M32 = 0xFFFFFFFF


def _umulhi(a: int, b: torch.Tensor) -> torch.Tensor:
    """High 32 bits of a * b for a uint32 constant and uint32 values held in int64, exactly:
    split b in 16-bit halves so no product exceeds 2**48."""
    lo = a * (b & 0xFFFF)
    hi = a * (b >> 16)
    return ((hi + (lo >> 16)) >> 16) & _M32


def philox4x32(seed: int, c0: torch.Tensor, c1: torch.Tensor, rounds: int = 10):
    """Philox-4x32-10 as `tl.philox(seed, c0, c1, 0, 0)` computes it (key = the seed's low
    and high 32 bits), in int64 PyTorch: the independent reference of the kernels' stream."""
    k0, k1 = seed & _M32, (seed >> 32) & _M32
    x0, x1 = c0.to(torch.int64) & _M32, c1.to(torch.int64) & _M32
    x2 = torch.zeros_like(x0)
    x3 = torch.zeros_like(x0)
    for _ in range(rounds):
        a, b = 0xD2511F53, 0xCD9E8D57
        y0 = _umulhi(b, x2) ^ x1 ^ k0
        y2 = _umulhi(a, x0) ^ x3 ^ k1
        x1 = (b * (x2 & 0xFFFF) + (((b * (x2 >> 16)) & 0xFFFF) << 16)) & _M32
        x3 = (a * (x0 & 0xFFFF) + (((a * (x0 >> 16)) & 0xFFFF) << 16)) & _M32
        x0, x2 = y0, y2
        k0, k1 = (k0 + 0x9E3779B9) & _M32, (k1 + 0xBB67AE85) & _M32
    return x0, x1, x2, x3


def dropout_keep_philox(seed: int, rows: int, cols: int, p: float, device="cpu") -> torch.Tensor:
    """The Triton kernels' keep-mask (see `_jit._dropout_keep`) in PyTorch: one
    Philox call per (row, 8 columns), 16-bit slices compared with round(p * 2**16). Column
    8j + 4i + 2q + h takes half h of value r[2q + i] of group j."""
    groups = -(-cols // 8)
    c0 = torch.arange(groups, dtype=torch.int64).expand(rows, groups)
    c1 = torch.arange(rows, dtype=torch.int64)[:, None].expand(rows, groups)
    r = torch.stack(philox4x32(int(seed), c0, c1), dim=-1)  # [rows, groups, 4]: r[2q + i]
    r = r.view(rows, groups, 2, 2).transpose(-1, -2)  # [.., i, q]
    r = torch.stack((r & 0xFFFF, r >> 16), dim=-1)  # [.., i, q, h]
    threshold = min(int(round(p * 65536)), 65536)
    keep = r.reshape(rows, groups * 8)[:, :cols] >= threshold
    return keep.to(device)
