"""Drop-in modules around `add_norm`, and `swap_norms` to put them into an existing model.

`FusedAddLayerNorm` / `FusedAddRMSNorm` take `nn.LayerNorm` / `nn.RMSNorm` constructor
arguments and keep their parameter names (`weight`, `bias`), so state dicts load both ways.
`forward(x, residual=None)` adds the residual (and dropout, if configured) before the norm.
"""

from __future__ import annotations

import numbers

import torch
from torch import nn

from membound.errors import BadInput
from membound.nn.functional import add_norm


def _hidden(normalized_shape) -> int:
    if isinstance(normalized_shape, numbers.Integral):
        return int(normalized_shape)
    shape = tuple(normalized_shape)
    if len(shape) != 1:
        raise BadInput(
            f"normalized_shape {shape} normalizes several dims; the fused norms normalize the "
            "last dim only (pass a single size)."
        )
    return int(shape[0])


class _FusedAddNorm(nn.Module):
    _norm = "layer"

    def __init__(
        self,
        normalized_shape,
        eps: float | None = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device=None,
        dtype=None,
        *,
        dropout_p: float = 0.0,
        prenorm: bool = False,
        residual_dtype: torch.dtype | None = None,
    ):
        super().__init__()
        hidden = _hidden(normalized_shape)
        self.normalized_shape = (hidden,)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.dropout_p = dropout_p
        self.prenorm = prenorm
        self.residual_dtype = residual_dtype
        factory = {"device": device, "dtype": dtype}
        affine = elementwise_affine
        self.weight = nn.Parameter(torch.ones(hidden, **factory)) if affine else None
        self.bias = nn.Parameter(torch.zeros(hidden, **factory)) if affine and bias else None

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None):
        return add_norm(
            x, self.weight, self.bias, residual=residual, dropout_p=self.dropout_p,
            norm=self._norm, eps=self.eps, prenorm=self.prenorm,
            residual_dtype=self.residual_dtype, training=self.training,
        )  # fmt: skip

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine="
            f"{self.elementwise_affine}, dropout_p={self.dropout_p}, prenorm={self.prenorm}"
        )


class FusedAddLayerNorm(_FusedAddNorm):
    """`nn.LayerNorm` over the last dim, optionally fused with residual add and dropout."""

    _norm = "layer"


class FusedAddRMSNorm(_FusedAddNorm):
    """`nn.RMSNorm` over the last dim (no bias; eps=None means finfo(dtype).eps)."""

    _norm = "rms"

    def __init__(self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True,
                 device=None, dtype=None, **kwargs):  # fmt: skip
        super().__init__(normalized_shape, eps, elementwise_affine, False, device, dtype, **kwargs)


def _from_layer_norm(m: nn.Module) -> nn.Module | None:
    if len(m.normalized_shape) != 1:
        return None
    new = FusedAddLayerNorm(m.normalized_shape, m.eps, elementwise_affine=False)
    new.weight, new.bias = m.weight, m.bias
    new.elementwise_affine = m.weight is not None
    return new


def _from_rms_norm(m: nn.Module) -> nn.Module | None:
    if len(m.normalized_shape) != 1:
        return None
    new = FusedAddRMSNorm(m.normalized_shape, m.eps, elementwise_affine=False)
    new.weight = m.weight
    new.elementwise_affine = m.weight is not None
    return new


def _swappers() -> dict[type, object]:
    table: dict[type, object] = {nn.LayerNorm: _from_layer_norm}
    if hasattr(nn, "RMSNorm"):  # torch >= 2.4
        table[nn.RMSNorm] = _from_rms_norm
    return table


def swap_norms(model: nn.Module) -> nn.Module:
    """Replace every `nn.LayerNorm` (and `nn.RMSNorm`) normalizing one dim with its fused
    equivalent, in place, sharing the same Parameter objects (weights, optimizer state and
    device kept). Norms over several dims are left alone. Returns `model`; a model that is
    itself a norm is returned replaced."""
    table = _swappers()
    top = table.get(type(model))
    if top is not None:
        return top(model) or model
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            make = table.get(type(child))
            if make is None:
                continue
            new = make(child)
            if new is not None:
                new.train(child.training)
                setattr(parent, name, new)
    return model
