"""membound.demos: the two classic experiments, runnable end to end (`membound demo`).

- `layernorm`: the memory wall inside the GPU. LayerNorm with fp32 storage and fp32 math,
  fp32 storage and fp16 math, bf16 storage, and residual add + dropout + LayerNorm unfused
  vs fused, timed on this device and placed on its roofline.
- `input-pipeline`: the memory wall between host and GPU. One small training loop fed four
  ways, each captured with `membound.profile` and analysed.

Without a GPU, `membound demo` runs what applies: this CPU's roofline and the analysis of
real H200 traces shipped in `traces/` (recorded 2026-11-29, torch 2.11).
"""

from __future__ import annotations

from pathlib import Path

TRACES_DIR = Path(__file__).resolve().parent / "traces"

#: the recorded H200 traces shipped with the package: name -> what ran
RECORDED_SCENARIOS = {
    "pageable-copy": "a training step fed with pageable tensors copied with non_blocking=True",
    "blocking-copy": "pinned batches copied on the compute stream (no overlap with compute)",
    "healthy": "a GEMM-bound bf16 training step, data already on the GPU",
}
#: the input-pipeline benchmark's traces (64x3x224x224 fp32 batches, ~2.7 ms of compute),
#: variant -> what fed the loop
RECORDED_PIPELINE = {
    "a-pageable": "pageable tensors, .to(cuda, non_blocking=True)",
    "b-dl-pinned": "DataLoader(pin_memory=True, 4 workers), non_blocking=True",
    "c-prefetch": "membound.data.prefetch (pinned pool, side stream)",
    "d-prefetch-u8": "prefetch of uint8 batches + membound.data.Normalize on the GPU",
}


def recorded_trace(name: str) -> Path:
    """Path of a shipped trace: a scenario name or `input-<variant>`."""
    return TRACES_DIR / f"{name}.json.gz"


def recorded_ceilings():
    """The ceilings measured on the H200 the shipped traces come from."""
    from membound.device.ceilings import Ceilings

    return Ceilings.load(TRACES_DIR / "h200-ceilings.json")
