"""Finding the ceilings to use: measured here (once per device identity, then cached), or,
for a trace recorded elsewhere, by its device name (a cached measurement of that GPU, else
its datasheet); the GPU<->GPU figures likewise.
"""

from __future__ import annotations

from typing import Any

from membound.device import cache, datasheet
from membound.device.ceilings import Ceilings
from membound.device.interconnect import Interconnect


def get_ceilings(
    device: str = "cuda",
    *,
    refresh: bool = False,
    progress: bool = True,
    quick: bool = False,
    sweep_order: str = "forward",
) -> Ceilings:
    """Measured ceilings of `device` ("cuda", "cuda:1", "cpu"): loaded from the cache when this
    exact device/driver/torch was measured before, else measured now (seconds) and cached.

    `refresh=True` re-measures; `quick=True` uses small buffers (tests, CI: a few seconds,
    numbers only indicative, cached apart from full runs); `progress` shows a progress bar on
    stderr while measuring; `sweep_order` ("forward" | "reverse") orders the matmul sweep's
    shapes when it measures (the result replaces the cached one either way).
    """
    kind, index = _parse_device(device)
    key = device_key(kind, index, quick=quick)
    if not refresh:
        cached = cache.load(key)
        if cached is not None:
            return cached
    # measuring imports what trace analysis never needs (it only looks ceilings up)
    from membound.device import measure

    if kind == "cuda":
        import torch

        with torch.cuda.device(index):
            ceilings = measure.measure(
                kind, key["name"], key, quick=quick, progress=progress, sweep_order=sweep_order
            )
    else:
        ceilings = measure.measure(
            kind, key["name"], key, quick=quick, progress=progress, sweep_order=sweep_order
        )
    cache.save(ceilings)
    return ceilings


def is_cached(device: str = "cuda", *, quick: bool = False) -> bool:
    """Whether `get_ceilings(device, quick=quick)` would load rather than measure."""
    return cached_ceilings(device, quick=quick) is not None


def cached_ceilings(device: str = "cuda", *, quick: bool = False) -> Ceilings | None:
    """The cached measurement `get_ceilings(device, quick=quick)` would load, or None."""
    kind, index = _parse_device(device)
    return cache.load(device_key(kind, index, quick=quick))


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


def ceilings_for_name(name: str) -> Ceilings | None:
    """Ceilings for a device known only by name (e.g. from a trace's device properties):
    the cached measured ceilings for that name if any, else the vendor datasheet figures as
    `Ceilings(source="datasheet")`, else None (unknown device, nothing measured)."""
    measured = cache.cached_for_name(name)
    if measured is not None:
        return measured
    spec = datasheet.lookup(name)
    if spec is None:
        return None
    figures = spec.figures()
    return Ceilings(
        device="cuda",
        name=name,
        memory_bandwidth=figures["memory_bandwidth"],
        flops=dict(spec.flops),
        source="datasheet",
        key={"datasheet": spec.name},
        datasheet=figures,
    )


#: file names beside a trace that hold the ceilings it was captured with (`membound diagnose`
#: writes `ceilings.json`; the package ships `h200-ceilings.json` beside its recorded traces)
BESIDE_NAMES = ("ceilings.json", "*-ceilings.json")


def ceilings_beside(folder, device_name: str | None) -> tuple[Ceilings | None, str | None]:
    """The ceilings written beside a trace for its device (`BESIDE_NAMES`), and their file."""
    from pathlib import Path

    if not device_name:
        return None, None
    folder = Path(folder)
    for pattern in BESIDE_NAMES:
        for path in sorted(folder.glob(pattern)):
            if not path.is_file():
                continue
            try:
                c = Ceilings.load(path)
            except Exception:  # not ceilings after all: keep looking
                continue
            if c.name == device_name:
                return c, str(path)
    return None, None


def interconnect_for(
    ceilings: Any, device_name: str | None
) -> tuple[Interconnect | None, str | None]:
    """The GPU<->GPU figures for an analysis, and where they came from: the ceilings in use
    (their `interconnect` field), else the newest cached measurement of this device name
    that has them (`membound roofline` on a machine with 2+ GPUs)."""
    data = getattr(ceilings, "interconnect", None) if ceilings is not None else None
    if isinstance(data, Interconnect):
        return data, "ceilings"
    if isinstance(data, dict) and data:
        return Interconnect.from_dict(data), "ceilings"
    cached = (
        cache.cached_for_name(device_name, lambda c: bool(c.interconnect)) if device_name else None
    )
    if cached is None:
        return None, None
    return Interconnect.from_dict(cached.interconnect), "ceilings cache"
