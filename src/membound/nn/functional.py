"""`add_norm`: residual add + bias + dropout + LayerNorm/RMSNorm in one pass over memory.

    s = dropout(x + pre_bias) + residual     (each part optional)
    y = norm(s) * weight + bias

Returns y, or (y, s) with prenorm=True: s is the new residual stream of a pre-norm
transformer block, kept in `residual_dtype` (e.g. fp32 while activations are bf16).
Triton kernels run for CUDA tensors (see `membound.nn.add_norm_op.use_triton` for the exact
rule); otherwise a pure-PyTorch reference with the same semantics runs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from membound.errors import BadInput

_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_NORMS = {"layer": False, "rms": True}  # name -> is_rms


def _check(name: str, t: torch.Tensor | None, x: torch.Tensor, shape, dev) -> None:
    """Raise BadInput unless `t` is None or a float tensor of `shape` on `dev` (x's device).
    Cheap on purpose: it runs on every call, and small calls are host-bound."""
    if t is None:
        return
    if not isinstance(t, torch.Tensor):
        raise BadInput(f"add_norm: {name} must be a tensor or None, got {type(t).__name__}.")
    if t.dtype not in _FLOAT_DTYPES:
        raise BadInput(
            f"add_norm: {name} has dtype {t.dtype}; use float32, float16 or bfloat16 "
            "(cast it with .float() first)."
        )
    if t.shape != shape:  # torch.Size is a tuple: no conversion needed
        raise BadInput(
            f"add_norm: {name} has shape {tuple(t.shape)} but must be {tuple(shape)} to match "
            f"x of shape {tuple(x.shape)}."
        )
    if t.device != dev:
        raise BadInput(
            f"add_norm: {name} is on {t.device} but x is on {x.device}; move both to one device."
        )


def add_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    *,
    residual: torch.Tensor | None = None,
    pre_bias: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    norm: str = "layer",
    eps: float | None = 1e-5,
    prenorm: bool = False,
    residual_dtype: torch.dtype | None = None,
    out_dtype: torch.dtype | None = None,
    training: bool = True,
):
    """Fused `y = norm(dropout(x + pre_bias) + residual) * weight + bias` over the last dim.

    Dropout scales kept values by 1/(1-p) like `F.dropout`, and is off when `training` is
    False. `eps=None` means `torch.finfo(x.dtype).eps` (as `nn.RMSNorm`). Every input may
    require grad. Raises `BadInput` for integer dtypes, mismatched shapes or devices.
    """
    if not isinstance(x, torch.Tensor):
        raise BadInput(f"add_norm: x must be a tensor, got {type(x).__name__}.")
    if x.dim() == 0:
        raise BadInput("add_norm: x must have at least one dimension (the one normalized).")
    is_rms = _NORMS.get(norm)
    if is_rms is None:
        raise BadInput(f"add_norm: norm must be one of {sorted(_NORMS)}, got {norm!r}.")
    if not 0.0 <= float(dropout_p) <= 1.0:
        raise BadInput(f"add_norm: dropout_p must be in [0, 1], got {dropout_p}.")
    dev = x.device
    _check("x", x, x, x.shape, dev)
    hidden = x.shape[-1]
    _check("residual", residual, x, x.shape, dev)
    _check("weight", weight, x, (hidden,), dev)
    _check("bias", bias, x, (hidden,), dev)
    _check("pre_bias", pre_bias, x, (hidden,), dev)
    for name, dt in (("residual_dtype", residual_dtype), ("out_dtype", out_dtype)):
        if dt is not None and dt not in _FLOAT_DTYPES:
            raise BadInput(f"add_norm: {name} must be float32, float16 or bfloat16, got {dt}.")
    if eps is None:
        eps = torch.finfo(x.dtype).eps
    p = float(dropout_p) if training else 0.0
    s_dtype = residual_dtype or (residual.dtype if residual is not None else x.dtype)
    # s equals x: nothing to write, the backward reads x instead (one tensor less each way)
    store_s = residual is not None or pre_bias is not None or p > 0.0 or s_dtype != x.dtype
    if x.numel() == 0:
        y = torch.empty_like(x, dtype=out_dtype or x.dtype)
        return (y, x.to(s_dtype)) if prenorm else y

    from membound.nn import add_norm_op as op

    needs_grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (x, residual, pre_bias, weight, bias)
    )
    small = op.EAGER_MAX_ELEMS if needs_grad else op.EAGER_MAX_ELEMS_NOGRAD
    if (
        x.is_cuda and (x.numel() <= small or (p == 0.0 and op.gpu_idle(x))) and op.use_triton(x)
    ) or (op.is_compiling() and p == 0.0 and op.COMPILE_DISPATCH == "inductor"):
        # size rule: small CUDA inputs are host-bound; the plain PyTorch ops (autograd does
        # the backward, no Python Function) cost what eager costs. Without grad the kernels'
        # one launch wins from ~2**20 elements on (run 26), with grad from 2**23. Above it,
        # without dropout, the same when the GPU already waits for the host (op.DISPATCH).
        # Tracing without dropout: plain ops too, which inductor fuses with their neighbours
        # (the custom op is opaque to it; see op.COMPILE_DISPATCH for what that cost)
        y, s = eager_add_norm(
            x, weight, bias, residual, pre_bias, p, is_rms, float(eps), s_dtype,
            out_dtype or x.dtype,
        )  # fmt: skip
        return (y, s) if prenorm else y
    args = (
        x, residual, pre_bias, weight, bias, p, is_rms, float(eps), store_s, s_dtype,
        out_dtype or x.dtype,
    )  # fmt: skip
    if op.is_compiling():  # tracing: the custom op (opaque to the compiler, with autograd)
        y, s, _, _, _ = op.add_norm_fwd_op(*args)
    elif needs_grad:  # eager training: the lean autograd.Function (cheapest dispatch)
        out = op.AddNormFunction.apply(*args)
        y, s = out if store_s else (out, None)
    else:  # nothing needs a gradient (inference): no autograd
        y, s = op._fwd_core(*args, size_rule=False)[:2]
    if not prenorm:
        return y
    return y, (s if store_s else x)


def eager_add_norm(x, weight, bias, residual, pre_bias, p, is_rms, eps, s_dtype, out_dtype):
    """add_norm as the plain PyTorch ops a user would write (the small-input training path):
    dropout from torch's generator (F.dropout), norm statistics in fp32 (F.layer_norm and
    F.rms_norm do that internally on CUDA for 16-bit inputs; with mixed parameter dtypes the
    math is written out in fp32). Returns (y, s)."""
    h = x if pre_bias is None else x + pre_bias
    if p > 0.0:
        h = F.dropout(h, p, training=True)
    s = h if residual is None else h + residual
    if s.dtype != s_dtype:  # a same-dtype .to() still costs a dispatcher call of host time
        s = s.to(s_dtype)
    n = (x.shape[-1],)
    same = all(t is None or t.dtype == s.dtype for t in (weight, bias))
    if not is_rms and same:  # one fused ATen kernel, fp32 statistics
        y = F.layer_norm(s, n, weight, bias, eps)
    elif same and hasattr(F, "rms_norm"):  # torch >= 2.4: one ATen op (fused on CUDA, fp32
        # statistics); written out below it was ~8 kernels, 9x eager's time (run 23)
        y = F.rms_norm(s, n, weight, eps)
        if bias is not None:
            y = y + bias
    else:  # mixed parameter dtypes (or an old torch): fp32 math, then the output dtype
        sf = s.float()
        if is_rms:
            y = sf * torch.rsqrt(sf.square().mean(-1, keepdim=True) + eps)
        else:
            y = F.layer_norm(sf, n, None, None, eps)
        if weight is not None:
            y = y * weight.float()
        if bias is not None:
            y = y + bias.float()
    return (y if y.dtype == out_dtype else y.to(out_dtype)), s
