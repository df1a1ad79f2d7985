"""What the hardware can do: measured ceilings (cached per device), datasheet figures.

`get_ceilings(device)` measures or loads; `ceilings_for_name(name)` serves the analysis of a
trace recorded elsewhere (cached measurement for that GPU, else its datasheet).
"""

from __future__ import annotations

from membound.device.ceilings import Ceilings, Transfer
from membound.device.lookup import ceilings_for_name, get_ceilings, interconnect_for

__all__ = ["Ceilings", "Transfer", "ceilings_for_name", "get_ceilings", "interconnect_for"]
