"""What the hardware can do: the ceilings a roofline is drawn from.

`Ceilings` is plain data (JSON round-trippable, `Ceilings.load(path)` reads a file).
Measuring lives in `device.measure`, caching in `device.cache`, vendor figures in
`device.datasheet`; `device.lookup` ties them together (measure once per device identity,
then load; serve a trace recorded elsewhere by its device name).
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from membound.errors import BadInput

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
    # bandwidth at the slow and fast end of the repeated copies (10th/90th percentile times)
    bandwidth_spread: list[float] | None = None


@dataclass
class Ceilings:
    """Measured (or datasheet) ceilings of one device."""

    device: str  # "cuda" | "cpu"
    name: str  # e.g. "NVIDIA H200"
    # bytes/s, 1 read : 1 write on buffers far larger than L2 (read + write counted): the best
    # of `device.measure.HBM_KERNELS`' copies (files written before: `copy_` alone)
    memory_bandwidth: float
    read_bandwidth: float | None = None  # bytes/s, read-only pass (the best of its sums)
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
    # the spread of each measured figure over its repeated runs: figure -> [slow, fast], the
    # rates at the 90th and 10th percentile run times; figures are "memory_bandwidth",
    # "read_bandwidth", "read_mix_bandwidth", "write_bandwidth", "l2_bandwidth" and
    # "flops.<compute key>"
    spread: dict[str, list[float]] = field(default_factory=dict)
    # the matmul sweep: compute key -> [{"m", "n", "k", "flops", "layout", "order"}] per shape
    # and operand layout timed ("A@B", or "A@B.T": nn.Linear's x @ W.T), `order` counting
    # the timings of that key from 0; the ceiling in `flops` is the best of them. Files
    # written before layouts were timed hold A@B rows without "layout" and "order".
    matmul_sweep: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # (added last: positional construction of the fields above stays valid)
    # bytes/s, write-only pass (the best `fill_` of a buffer far larger than L2): the roof of fills
    write_bandwidth: float | None = None
    # bytes/s, read + write counted: a copy whose source and destination sit in L2 (a
    # quarter of it), the rate between two such sizes so the fixed cost of a launch drops out
    # (`device.measure._l2`); the roof of work whose bytes fit in `l2_bytes`
    l2_bandwidth: float | None = None
    l2_bytes: int | None = None  # the L2 cache size (bytes) the L2 roof holds for
    # bytes/s, all three buffers counted: two reads to one write on buffers far larger than
    # L2 (the best of `device.measure.HBM_KERNELS`' `add` and `threshold_backward`); with the
    # 1:1, read and write passes, the HBM roof of a call follows its read share
    # (`analysis.roofline.hbm_rate`)
    read_mix_bandwidth: float | None = None
    # the HBM passes' kernels (`device.measure.HBM_KERNELS`): figure -> {"<op> <dtype>": rate};
    # each figure above is the best of its kernels. Files written before hold none.
    memory_sweep: dict[str, dict[str, float]] = field(default_factory=dict)
    # seconds each measurement step took (`device.measure.STEPS` keys, in the order they ran):
    # where `seconds` went, against `membound roofline`'s 60 s on the H200 (issue 16). Files
    # written before hold none.
    step_seconds: dict[str, float] = field(default_factory=dict)

    def spread_of(self, figure: str) -> tuple[float, float] | None:
        """(slow, fast) rates of `figure` over its repeated runs, when it was measured so."""
        pair = self.spread.get(figure)
        if not pair or len(pair) != 2:
            return None
        return float(pair[0]), float(pair[1])

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

    @classmethod
    def load(cls, path: str | os.PathLike) -> Ceilings:
        """Ceilings from a file: what `membound roofline --json` wrote, a report JSON of
        `analyze`/`diagnose` (its `device.ceilings`), or a bare `to_dict()`; `BadInput`
        with one sentence when the file holds none."""
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise BadInput(
                f"cannot read ceilings from {path} ({exc}); pass the file `membound roofline --json` wrote."
            ) from None
        if isinstance(data, dict) and isinstance(data.get("ceilings"), dict):
            data = data["ceilings"]
        if (
            isinstance(data, dict)
            and isinstance(data.get("device"), dict)
            and isinstance(data["device"].get("ceilings"), dict)
        ):
            data = data["device"]["ceilings"]  # an analyze/diagnose report
        try:
            return cls.from_dict(data)
        except (TypeError, KeyError, ValueError) as exc:
            raise BadInput(
                f"{path} does not hold ceilings ({exc}); pass the file `membound roofline --json` wrote."
            ) from None
