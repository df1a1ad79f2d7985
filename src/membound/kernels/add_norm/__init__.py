"""Fused residual add + bias + dropout + LayerNorm/RMSNorm: Triton kernels, launchers, reference.

    s = dropout(x + pre_bias) + residual        (each part optional)
    y = norm(s) * weight + bias                 (norm = LayerNorm or RMSNorm over the last dim)

Modules, read in this order: `_jit` (the jit helpers every kernel shares), `rows` (one-tile
kernels), `chunked` (rows wider than a tile), `pair` (the SM-pair backward), `gluon` (the Gluon
backward), `partials` (parameter-gradient reductions), `config` (launch shapes and `Knobs`),
`plan` (launch plans, their cache, the Gluon fallback), `launch` (`add_norm_fwd`,
`add_norm_bwd`, `dropout_mask`), `ref` (the pure-PyTorch reference).

The public names below load on first use: importing this package (or `ref`, which the CPU
fallback uses) never imports triton.
"""

from __future__ import annotations

import importlib

#: public name -> the module defining it
_EXPORTS = {
    "add_norm_fwd": "launch",
    "add_norm_bwd": "launch",
    "dropout_mask": "launch",
    "configure": "plan",
    "configured": "plan",
    "Knobs": "config",
    "LaunchConfig": "config",
    "fwd_config": "config",
    "bwd_config": "config",
    "add_norm_ref": "ref",
    "add_norm_bwd_ref": "ref",
    "dropout_keep_ref": "ref",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
