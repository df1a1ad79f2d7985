"""membound.nn: fused modules (drop-in for nn.LayerNorm / nn.RMSNorm) and `swap_norms`.

Importing this package never imports triton: the kernels load on the first call that
runs them (see `membound.nn.add_norm_op.use_triton`).
"""

from membound.nn import functional
from membound.nn.add_norm_op import set_add_norm_dispatch
from membound.nn.modules import FusedAddLayerNorm, FusedAddRMSNorm, swap_norms

__all__ = [
    "FusedAddLayerNorm",
    "FusedAddRMSNorm",
    "functional",
    "set_add_norm_dispatch",
    "swap_norms",
]
