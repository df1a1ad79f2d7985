"""Drop-in modules around `add_norm`, and `swap_norms` to put them into an existing model.

`FusedAddLayerNorm` / `FusedAddRMSNorm` take `nn.LayerNorm` / `nn.RMSNorm` constructor
arguments and keep their parameter names (`weight`, `bias`), so state dicts load both ways.
`forward(x, residual=None)` adds the residual (and dropout, if configured) before the norm.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import torch
from torch import nn

from membound.errors import BadInput
from membound.nn.functional import add_norm

_RMS = getattr(nn, "RMSNorm", None)  # torch >= 2.4


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


@dataclass
class Swap:
    """What `swap_norms` did with one norm-like module."""

    name: str  # its path in the model ("" for the model itself)
    kind: str  # its class name
    swapped: bool
    why: str  # "layer"/"rms" matched on a probe input, or why it was left


#: a probe's relative error under which the fused norm computes the same function
_TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-6}
_TOLERANCE_16 = 2e-2
#: norms with running statistics or that normalize other dims: never candidates
_NOT_LAST_DIM = (nn.modules.batchnorm._NormBase, nn.GroupNorm, nn.LocalResponseNorm)


def _eps(m: nn.Module):
    for name in ("eps", "variance_epsilon", "epsilon"):
        v = getattr(m, name, None)
        if isinstance(v, numbers.Real) and not isinstance(v, bool):
            return float(v)
    if _RMS is not None and isinstance(m, _RMS):
        return getattr(m, "eps", None)  # nn.RMSNorm's eps may be None: finfo(dtype).eps
    return None


def _candidate(m: nn.Module) -> tuple[str, ...] | str:
    """The norm kinds to try for `m` (most likely first), or why it is no candidate."""
    if isinstance(m, _NOT_LAST_DIM):
        return "normalizes over the batch or groups, not the last dim"
    if isinstance(m, nn.LayerNorm):
        return ("layer",)
    if _RMS is not None and isinstance(m, _RMS):
        return ("rms",)
    w = getattr(m, "weight", None)
    if not isinstance(w, torch.Tensor) or w.dim() != 1 or any(True for _ in m.children()):
        return "no 1-D weight, or it has submodules"
    if _eps(m) is None:
        return "no eps / variance_epsilon"
    b = getattr(m, "bias", None)
    return ("layer",) if isinstance(b, torch.Tensor) else ("rms", "layer")


def _replacement(m: nn.Module, kind: str) -> nn.Module:
    w = getattr(m, "weight", None)
    b = getattr(m, "bias", None) if kind == "layer" else None
    hidden = int(w.shape[0]) if isinstance(w, torch.Tensor) else _hidden(m.normalized_shape)
    cls = FusedAddLayerNorm if kind == "layer" else FusedAddRMSNorm
    new = cls(hidden, _eps(m), elementwise_affine=False)
    new.weight = w if isinstance(w, nn.Parameter) else None
    if kind == "layer":
        new.bias = b if isinstance(b, nn.Parameter) else None
    new.elementwise_affine = new.weight is not None
    new.train(m.training)
    return new


def _same_function(m: nn.Module, new: nn.Module) -> str | None:
    """None when `new` computes what `m` computes on a probe input, else why not."""
    p = next(iter(m.parameters()), None)
    hidden = new.normalized_shape[0]
    device = p.device if p is not None else torch.device("cpu")
    dtype = p.dtype if p is not None and p.is_floating_point() else torch.float32
    # a generator of its own: probing must not move the program's random state
    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(4, 3, hidden, device=device, dtype=dtype, generator=gen)
    was = m.training, new.training
    m.eval(), new.eval()  # no dropout in the probe
    try:
        with torch.no_grad():
            want, got = m(x), new(x)
    except Exception as exc:  # its forward takes other arguments: not a plain norm
        return f"its forward does not take one tensor ({type(exc).__name__})"
    finally:
        m.train(was[0]), new.train(was[1])
    if not isinstance(want, torch.Tensor) or want.shape != got.shape:
        return "its output is not one tensor of the input's shape"
    if want.dtype != got.dtype:
        return f"it returns {want.dtype} for {dtype} input (the fused norm returns {got.dtype})"
    ref = want.double()
    err = float((got.double() - ref).norm() / ref.norm().clamp_min(1e-30))
    tol = _TOLERANCE.get(dtype, _TOLERANCE_16)
    return None if err <= tol else f"a probe input differs by {err:.1e} (relative)"


def _swap_one(name: str, m: nn.Module) -> tuple[nn.Module | None, Swap]:
    kinds = _candidate(m)
    if isinstance(kinds, str):
        return None, Swap(name, type(m).__name__, False, kinds)
    whys = []
    for kind in kinds:
        try:
            new = _replacement(m, kind)
        except (BadInput, AttributeError, TypeError, ValueError) as exc:
            whys.append(f"{kind}: {exc}")
            continue
        why = _same_function(m, new)
        if why is None:
            return new, Swap(name, type(m).__name__, True, f"{kind} norm, checked on a probe")
        whys.append(f"{kind}: {why}")
    return None, Swap(name, type(m).__name__, False, "; ".join(whys))


def _looks_like_norm(m: nn.Module) -> bool:
    return isinstance(m, (nn.LayerNorm, *_NOT_LAST_DIM)) or (
        (_RMS is not None and isinstance(m, _RMS)) or "norm" in type(m).__name__.lower()
    )


def swap_norms(model: nn.Module, *, report: list | None = None) -> nn.Module:
    """Replace every norm over the last dim with membound's fused one, in place, sharing the
    same Parameter objects (weights, optimizer state and device kept).

    A module is recognised by what it computes, not its class: `nn.LayerNorm`/`nn.RMSNorm`
    and their subclasses (timm's LayerNorm), or any leaf module with a 1-D `weight`, an
    optional `bias` and an `eps`/`variance_epsilon` (Hugging Face's LlamaRMSNorm), and it is
    swapped only when the fused norm gives its output on a probe input (same shape and dtype,
    relative error under 1e-4 in fp32, 2e-2 in 16-bit). Norms over several dims, BatchNorm and
    GroupNorm are left alone. `report`: a list that receives one `Swap` per norm-like module
    (what was swapped, what was not, and why). Returns `model`; a model that is itself a norm
    is returned replaced."""
    found: list[Swap] = []
    if _looks_like_norm(model) and not any(True for _ in model.children()):
        new, swap = _swap_one("", model)
        found.append(swap)
        if report is not None:
            report.extend(found)
        return new if new is not None else model
    for parent_name, parent in list(model.named_modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, _FusedAddNorm) or not _looks_like_norm(child):
                continue
            new, swap = _swap_one(f"{parent_name}.{name}" if parent_name else name, child)
            found.append(swap)
            if new is not None:
                setattr(parent, name, new)
    if report is not None:
        report.extend(found)
    return model
