"""Vendor datasheet ceilings for known GPUs, and tolerant matching of device names.

Figures are the vendors' *dense* peaks (no structured sparsity), in bytes/s and FLOP/s, with
the same keys as `Ceilings.flops` plus "memory_bandwidth". fp16/bf16/fp8 figures assume fp32
accumulation where a card distinguishes (GeForce halves it), because that is what PyTorch
matmuls do. "fp32" is the non-tensor-core rate, which is both the fp32 matmul ceiling with
TF32 off and the vector FMA rate.

Names as drivers report them vary ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB",
"NVIDIA GeForce RTX 4090", "H100 SXM"), so an entry matches by regular expressions on a
normalised name, most specific variants first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

T = 1e12  # TFLOP/s or TB/s


@dataclass(frozen=True)
class Spec:
    name: str  # canonical name shown in reports
    patterns: tuple[str, ...]  # all must match the normalised name (re.search)
    memory_bandwidth: float  # bytes/s
    flops: dict[str, float]

    def figures(self) -> dict[str, float]:
        """Flat dict, the shape `Ceilings.datasheet` stores: memory_bandwidth + flops keys."""
        return {"memory_bandwidth": self.memory_bandwidth, **self.flops}


def _f(fp32: float, tf32: float, half: float, fp8: float | None = None, **more: float):
    out = {"fp32": fp32 * T, "fp32_vector": fp32 * T, "tf32": tf32 * T, "fp16": half * T}
    out["bf16"] = half * T
    if fp8:
        out["fp8"] = fp8 * T
    out.update({k: v * T for k, v in more.items()})
    return out


#: Ordered: the first entry whose patterns all match wins, so variants precede the default.
SPECS: tuple[Spec, ...] = (
    Spec("H200 NVL", (r"\bh200\b", r"\bnvl\b"), 4.8 * T, _f(60, 417.5, 835, 1670, fp64=30)),
    Spec("H200 SXM", (r"\bh200\b",), 4.8 * T, _f(67, 494.7, 989.4, 1978.9, fp64=34)),
    Spec("H100 NVL", (r"\bh100\b", r"\bnvl\b"), 3.9 * T, _f(60, 417.5, 835, 1670, fp64=30)),
    Spec("H100 PCIe", (r"\bh100\b", r"\bpcie\b"), 2.0 * T, _f(51.2, 378, 756, 1513, fp64=25.6)),
    Spec("H100 SXM", (r"\bh100\b",), 3.35 * T, _f(67, 494.7, 989.4, 1978.9, fp64=34)),
    Spec(
        "A100 PCIe 40GB",
        (r"\ba100\b", r"\bpcie\b", r"\b40\s?gb\b"),
        1.555 * T,
        _f(19.5, 156, 312, fp64=9.7),
    ),
    Spec("A100 PCIe 80GB", (r"\ba100\b", r"\bpcie\b"), 1.935 * T, _f(19.5, 156, 312, fp64=9.7)),
    Spec("A100 SXM 40GB", (r"\ba100\b", r"\b40\s?gb\b"), 1.555 * T, _f(19.5, 156, 312, fp64=9.7)),
    Spec("A100 SXM 80GB", (r"\ba100\b",), 2.039 * T, _f(19.5, 156, 312, fp64=9.7)),
    Spec("L40S", (r"\bl40s\b",), 0.864 * T, _f(91.6, 183, 362, 733)),
    Spec("L40", (r"\bl40\b",), 0.864 * T, _f(90.5, 90.5, 181, 362)),
    Spec("L4", (r"\bl4\b",), 0.300 * T, _f(30.3, 60, 121, 242)),
    Spec("A10", (r"\ba10\b",), 0.600 * T, _f(31.2, 62.5, 125)),
    Spec("RTX 4090", (r"\brtx 4090\b",), 1.008 * T, _f(82.6, 82.6, 165.2, 330.3)),
    Spec("RTX 3090", (r"\brtx 3090\b",), 0.936 * T, _f(35.6, 35.6, 71)),
    Spec("V100", (r"\bv100\b",), 0.900 * T, _f(15.7, 15.7, 125, fp64=7.8)),
    Spec("T4", (r"\bt4\b",), 0.320 * T, _f(8.1, 8.1, 65)),
)


def normalise(name: str) -> str:
    """Lower-case, vendor words dropped, separators unified: 'NVIDIA A100-SXM4-80GB' -> 'a100 sxm4 80gb'."""
    s = name.lower()
    s = re.sub(r"\b(nvidia|geforce|tesla)\b", " ", s)
    s = re.sub(r"[-_/,()]+", " ", s)
    return re.sub(r"\s+", " ", s).strip()


def lookup(name: str) -> Spec | None:
    """The datasheet entry for a device name as any driver or user spells it, or None."""
    norm = normalise(name)
    for spec in SPECS:
        if all(re.search(p, norm) for p in spec.patterns):
            return spec
    return None


def figures(name: str) -> dict[str, float] | None:
    spec = lookup(name)
    return spec.figures() if spec else None
