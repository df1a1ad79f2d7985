"""What the hardware can do: the ceilings a roofline is drawn from.

`Ceilings` is plain data (JSON round-trippable). Measuring lives in `device.measure`,
caching in `device.cache`, vendor figures in `device.datasheet`; `get_ceilings` ties them
together (measure once per device identity, then load).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

#: compute-dtype keys used across membound (cost model, ceilings, roofline):
#: "fp64", "fp32" (fp32 matmul, TF32 off), "tf32", "fp16", "bf16", "fp8",
#: "fp32_vector" (non-tensor-core FMA rate), "int8".
COMPUTE_KEYS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "fp32_vector", "int8")


@dataclass
class Transfer:
    """One host<->device copy configuration, measured."""

    direction: str  # "h2d" | "d2h"
    memory: str  # "pageable" | "pinned"
    non_blocking: bool
    bytes: int  # size of one copy
    bandwidth: float  # bytes/s, wall time of the copy as the GPU sees it
    host_blocked_fraction: float  # share of the copy during which the host call did not return


@dataclass
class Ceilings:
    """Measured (or datasheet) ceilings of one device."""

    device: str  # "cuda" | "cpu"
    name: str  # e.g. "NVIDIA H200"
    memory_bandwidth: float  # bytes/s, large device copy, read + write counted
    read_bandwidth: float | None = None  # bytes/s, read-dominated pass (sum)
    flops: dict[str, float] = field(default_factory=dict)  # COMPUTE_KEYS -> FLOP/s
    transfers: list[Transfer] = field(default_factory=list)
    source: str = "measured"  # "measured" | "datasheet"
    key: dict[str, Any] = field(default_factory=dict)  # cache key parts: driver, torch, ...
    measured_at: str | None = None
    seconds: float | None = None  # how long the measurement took
    # vendor figures, same keys ("memory_bandwidth", flops keys)
    datasheet: dict[str, float] | None = None
    # GPU<->GPU figures (peer copy, all-reduce bus bandwidth) on machines with 2+ GPUs
    interconnect: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)  # measurements skipped here, and why

    def peak_flops(self, compute: str | None) -> float:
        """Ceiling for a compute-dtype key; falls back to the nearest sensible rate."""
        if compute and compute in self.flops:
            return self.flops[compute]
        for fallback in ("fp32_vector", "fp32"):
            if fallback in self.flops:
                return self.flops[fallback]
        return max(self.flops.values()) if self.flops else float("nan")

    def ridge(self, compute: str | None) -> float:
        """Arithmetic intensity (FLOP/byte) where the memory roof meets the compute roof."""
        return self.peak_flops(compute) / self.memory_bandwidth

    def transfer(self, direction: str, memory: str, non_blocking: bool) -> Transfer | None:
        for t in self.transfers:
            if (t.direction, t.memory, t.non_blocking) == (direction, memory, non_blocking):
                return t
        return None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Ceilings:
        data = dict(data)
        data["transfers"] = [Transfer(**t) for t in data.get("transfers", [])]
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def get_ceilings(
    device: str = "cuda", *, refresh: bool = False, progress: bool = True, quick: bool = False
) -> Ceilings:
    """Measured ceilings of `device` ("cuda", "cuda:1", "cpu"): loaded from the cache when this
    exact device/driver/torch was measured before, else measured now (seconds) and cached.

    `refresh=True` re-measures; `quick=True` uses small buffers (tests, CI: a few seconds,
    numbers only indicative, cached apart from full runs); `progress` shows a progress bar on
    stderr while measuring.
    """
    from membound.device import cache, measure

    kind, index = _parse_device(device)
    key = device_key(kind, index, quick=quick)
    if not refresh:
        cached = cache.load(key)
        if cached is not None:
            return cached
    if kind == "cuda":
        import torch

        with torch.cuda.device(index):
            ceilings = measure.measure(kind, key["name"], key, quick=quick, progress=progress)
    else:
        ceilings = measure.measure(kind, key["name"], key, quick=quick, progress=progress)
    cache.save(ceilings)
    return ceilings


def _parse_device(device: str) -> tuple[str, int]:
    import torch

    from membound.errors import BadInput, NeedsGPU

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise BadInput(f"unknown device {device!r}; use 'cuda', 'cuda:N' or 'cpu'") from None
    if dev.type == "cpu":
        return "cpu", 0
    if dev.type != "cuda":
        raise BadInput(f"membound measures 'cuda' and 'cpu' devices, not {dev.type!r}")
    if not torch.cuda.is_available():
        raise NeedsGPU("no CUDA device is available here; measure the CPU with --device cpu")
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    if index >= torch.cuda.device_count():
        raise BadInput(
            f"{device!r} does not exist: this machine has {torch.cuda.device_count()} CUDA device(s)"
        )
    return "cuda", index


def device_key(kind: str, index: int = 0, *, quick: bool = False) -> dict[str, Any]:
    """The identity a measurement is valid for (the cache key)."""
    import platform

    import torch

    key: dict[str, Any] = {"device": kind, "torch": torch.__version__, "quick": bool(quick)}
    if kind == "cuda":
        key["name"] = torch.cuda.get_device_name(index)
        key["cuda"] = torch.version.cuda or torch.version.hip
        try:
            key["driver"] = int(torch._C._cuda_getDriverVersion())
        except Exception:  # private API: absent on some builds
            key["driver"] = None
    else:
        key["name"] = _cpu_name() or platform.processor() or platform.machine() or "cpu"
        key["threads"] = torch.get_num_threads()
    return key


def _cpu_name() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None
