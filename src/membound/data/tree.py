"""Take a batch apart into its leaves and put it back together.

A batch is any nesting of tensors in tuples, lists, dicts, namedtuples and dataclasses, plus
opaque objects that know how to move themselves (`pin_memory()` / `to()`). We do not use
`torch.utils._pytree`: it treats dataclasses as leaves unless each class is registered, and
the prefetcher must accept a user's batch type without registration.

Leaves are tensors and movable objects; anything else (ints, strings, None) stays in the
skeleton untouched.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import torch


def is_movable(obj: Any) -> bool:
    """An object (not a tensor) that moves itself: it has `to()` and usually `pin_memory()`."""
    return not isinstance(obj, torch.Tensor) and callable(getattr(obj, "to", None))


def _is_namedtuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(type(obj), "_fields")


def flatten(batch: Any) -> tuple[list[Any], Callable[[list[Any]], Any]]:
    """Return (leaves, rebuild): `rebuild(new_leaves)` makes a batch of the same structure."""
    leaves: list[Any] = []
    return leaves, _walk(batch, leaves)


def _walk(obj: Any, leaves: list[Any]) -> Callable[[list[Any]], Any]:
    # A module function, not a closure over `leaves`: a nested `walk` refers to itself through
    # its closure cell, and that cycle held every batch's leaves until the garbage collector
    # ran. For the prefetcher those are device tensors with recorded streams; a DataLoader
    # worker forked before the collection freed them in the child, called CUDA there and died.
    # The rebuild functions below hold the structure, never the leaves.
    if isinstance(obj, torch.Tensor) or (
        is_movable(obj)
        and not dataclasses.is_dataclass(obj)
        and not isinstance(obj, (tuple, list, dict))
    ):
        i = len(leaves)
        leaves.append(obj)
        return lambda new: new[i]
    if _is_namedtuple(obj):
        parts = [_walk(v, leaves) for v in obj]
        cls = type(obj)
        return lambda new: cls(*(p(new) for p in parts))
    if isinstance(obj, (tuple, list)):
        parts = [_walk(v, leaves) for v in obj]
        cls = type(obj)
        if cls in (tuple, list):
            return lambda new: cls(p(new) for p in parts)
        # A subclass of list/tuple: rebuild through a shallow copy so extra state survives.
        return lambda new: _rebuild_sequence(obj, [p(new) for p in parts])
    if isinstance(obj, dict):
        parts_of = {k: _walk(v, leaves) for k, v in obj.items()}

        def rebuild_dict(new: list[Any]) -> Any:
            out = copy.copy(obj)  # keeps OrderedDict/defaultdict and their extra state
            for k, p in parts_of.items():
                out[k] = p(new)
            return out

        return rebuild_dict
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = {f.name: _walk(getattr(obj, f.name), leaves) for f in dataclasses.fields(obj)}

        def rebuild_dataclass(new: list[Any]) -> Any:
            # copy + object.__setattr__ works for frozen dataclasses and init=False fields,
            # which `dataclasses.replace` does not.
            out = copy.copy(obj)
            for name, p in fields.items():
                object.__setattr__(out, name, p(new))
            return out

        return rebuild_dataclass
    return lambda new: obj


def _rebuild_sequence(template: Any, values: list[Any]) -> Any:
    if isinstance(template, list):
        out = copy.copy(template)
        out[:] = values
        return out
    return type(template)(values)


def tree_map(fn: Callable[[Any], Any], batch: Any) -> Any:
    """Apply `fn` to every leaf (tensor or movable object) and rebuild the batch."""
    leaves, rebuild = flatten(batch)
    return rebuild([fn(leaf) for leaf in leaves])
