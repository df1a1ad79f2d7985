"""Measured ceilings cached as JSON, one file per device identity (the GPU<->GPU figures
inside them, `Ceilings.interconnect`: one cache for every measured figure).

A cache entry is valid only for the exact identity it was measured under (device name,
driver, torch version, thread count on CPU, quick or full sizes): a driver or torch upgrade
can move the numbers, so it re-measures rather than trusting stale figures.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from membound._env import cache_dir
from membound.device.ceilings import Ceilings

PREFIX = "ceilings-"


def path_for(key: dict[str, Any]) -> Path:
    digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]
    slug = re.sub(r"[^a-z0-9]+", "-", str(key.get("name", "device")).lower()).strip("-")
    return cache_dir() / f"{PREFIX}{slug}-{digest}.json"


def load(key: dict[str, Any]) -> Ceilings | None:
    """The cached Ceilings for exactly this identity, or None (missing or unreadable)."""
    path = path_for(key)
    try:
        data = json.loads(path.read_text())
        ceilings = Ceilings.from_dict(data)
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return ceilings if ceilings.key == key else None


def save(ceilings: Ceilings) -> Path:
    path = path_for(ceilings.key)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    # write-then-rename so a concurrent reader never sees half a file
    tmp.write_text(json.dumps(ceilings.to_dict(), indent=1, sort_keys=True))
    tmp.replace(path)
    return path


def cached_for_name(name: str, having: Callable[[Ceilings], bool] | None = None) -> Ceilings | None:
    """The best cached measurement of a device called `name` (and for which `having` holds),
    whatever driver/torch it was measured under: full runs before quick ones, then the most
    recent."""
    found: list[Ceilings] = []
    directory = cache_dir()
    if not directory.is_dir():
        return None
    for path in directory.glob(f"{PREFIX}*.json"):
        try:
            c = Ceilings.from_dict(json.loads(path.read_text()))
        except (OSError, ValueError, TypeError, KeyError):
            continue
        if c.name == name and (having is None or having(c)):
            found.append(c)
    if not found:
        return None
    found.sort(key=lambda c: (not c.key.get("quick", False), c.measured_at or ""))
    return found[-1]
