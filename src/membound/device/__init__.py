"""What the hardware can do: measured ceilings (cached per device), datasheet figures.

`get_ceilings(device)` measures or loads; `ceilings_for_name(name)` serves the analysis of a
trace recorded elsewhere (cached measurement for that GPU, else its datasheet).
"""

from __future__ import annotations

from membound.device.ceilings import Ceilings, Transfer, get_ceilings

__all__ = ["Ceilings", "Transfer", "ceilings_for_name", "get_ceilings"]


def ceilings_for_name(name: str) -> Ceilings | None:
    """Ceilings for a device known only by name (e.g. from a trace's device properties):
    the cached measured ceilings for that name if any, else the vendor datasheet figures as
    `Ceilings(source="datasheet")`, else None (unknown device, nothing measured)."""
    from membound.device import cache, datasheet

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
