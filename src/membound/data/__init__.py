"""membound.data: feeding the GPU.

`prefetch` copies batches ahead on a side stream from pinned buffers; `Normalize` (and
`ToFloat`, `ChannelsLast`) convert uint8 images on the GPU so 4x fewer bytes cross PCIe;
`strict_copies` catches non_blocking copies from pageable memory, which silently block.
Nothing here touches CUDA at import.
"""

from __future__ import annotations

from membound.data.guard import PageableCopy, PageableCopyWarning, strict_copies
from membound.data.prefetch import Prefetcher, prefetch
from membound.data.transforms import ChannelsLast, Normalize, ToFloat

__all__ = [
    "ChannelsLast",
    "Normalize",
    "PageableCopy",
    "PageableCopyWarning",
    "Prefetcher",
    "ToFloat",
    "prefetch",
    "strict_copies",
]
