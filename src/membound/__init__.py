"""membound: find where a PyTorch program waits on data movement instead of computing.

Nothing heavy happens at import: no GPU query, no Triton import. Public names are
re-exported lazily from the sub-packages that own them.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> "module:attribute" (or "module" for a submodule); resolved on first access
# (PEP 562).
_EXPORTS = {
    "roofline": "membound.roofline",
    "Ceilings": "membound.device.ceilings:Ceilings",
    "ceilings": "membound.device.lookup:get_ceilings",
    "Cost": "membound.cost.registry:Cost",
    "CostCounter": "membound.cost.counter:CostCounter",
    "profile": "membound.api:profile",
    "step": "membound.trace.capture:step",
    "analyze": "membound.analysis:analyze",
    "prefetch": "membound.data.prefetch:prefetch",
    "Prefetcher": "membound.data.prefetch:Prefetcher",
    "Normalize": "membound.data.transforms:Normalize",
    "strict_copies": "membound.data.guard:strict_copies",
    "FusedAddLayerNorm": "membound.nn.modules:FusedAddLayerNorm",
    "FusedAddRMSNorm": "membound.nn.modules:FusedAddRMSNorm",
    "swap_norms": "membound.nn.modules:swap_norms",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'membound' has no attribute {name!r}")
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    value = getattr(module, attr) if attr else module
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
