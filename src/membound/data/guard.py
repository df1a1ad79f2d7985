"""`strict_copies()`: catch host→device copies asking for non_blocking from pageable memory.

`x.cuda(non_blocking=True)` only overlaps with the host when `x` is pinned. From pageable
memory the driver stages the data through its own pinned buffer synchronously: the host
blocks for the whole copy (99.8% of it on an H200) and nothing warns. Inside

    with membound.data.strict_copies():          # or mode="raise"
        train_one_epoch()

every such copy via `Tensor.to`, `Tensor.cuda` or `Tensor.copy_` is reported once per call
site (file:line of the user's code) as a `PageableCopyWarning`, or raises `PageableCopy`.

How: while at least one guard is active, those three methods of `torch.Tensor` are wrapped;
the last guard to exit restores the originals, so an inactive guard costs nothing. We patch
rather than use a TorchFunctionMode because modes are per thread, and the copies worth
catching often run in a user's own loader or prefetch thread.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from membound.errors import BadInput

_MODES = ("warn", "raise")
#: Device types a copy "to the device" can target; cpu and meta are not transfers.
_HOST_TYPES = ("cpu", "meta")


class PageableCopyWarning(UserWarning):
    """A non_blocking host→device copy from pageable memory (it blocks the host)."""


class PageableCopy(BadInput):
    """Raised by `strict_copies(mode="raise")` at a non_blocking copy from pageable memory."""


# -- pure decision logic (tested exhaustively with fakes) -------------------------------


def _device_type(device: Any) -> str | None:
    if device is None:
        return None
    if isinstance(device, torch.Tensor):
        return device.device.type
    if isinstance(device, int) and not isinstance(device, bool):
        return "cuda"  # torch treats a bare index as a CUDA device
    if isinstance(device, (str, torch.device)):
        return torch.device(device).type
    return None


def parse_to_args(args: tuple, kwargs: dict) -> tuple[str | None, bool]:
    """(target device type or None, non_blocking) from the arguments of `Tensor.to`.

    Covers the three overloads: to(dtype, non_blocking, copy), to(device, dtype,
    non_blocking, copy) and to(tensor, non_blocking, copy), positional or keyword.
    """
    device = kwargs.get("device")
    non_blocking = kwargs.get("non_blocking", False)
    if args:
        first, rest = args[0], list(args[1:])
        if isinstance(first, torch.dtype):
            nb_pos = 0
        elif isinstance(first, torch.Tensor):
            device, nb_pos = first, 0
        else:
            device = first
            nb_pos = 1 if rest and isinstance(rest[0], torch.dtype) else 0
            if rest and rest[0] is None:  # to(device, None, non_blocking)
                nb_pos = 1
        if len(rest) > nb_pos:
            non_blocking = rest[nb_pos]
    return _device_type(device), bool(non_blocking)


def parse_cuda_args(args: tuple, kwargs: dict) -> tuple[str | None, bool]:
    """Arguments of `Tensor.cuda(device=None, non_blocking=False)`: target is always cuda."""
    non_blocking = kwargs.get("non_blocking", args[1] if len(args) > 1 else False)
    return "cuda", bool(non_blocking)


def is_pageable_async_h2d(
    src_type: str, dst_type: str | None, non_blocking: bool, src_pinned: Callable[[], bool]
) -> bool:
    """True for a host→device copy that asks for non_blocking from a non-pinned source.

    `src_pinned` is called only when the other conditions hold (asking can be costly).
    """
    if not non_blocking or dst_type is None:
        return False
    if src_type != "cpu" or dst_type in _HOST_TYPES:
        return False
    return not src_pinned()


def user_call_site(skip_dirs: tuple[str, ...] | None = None) -> tuple[str, int]:
    """(filename, line) of the innermost frame outside torch and this module."""
    skip = skip_dirs if skip_dirs is not None else _SKIP_DIRS
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(skip) and name != __file__:
            return name, frame.f_lineno
        frame = frame.f_back
    return "<unknown>", 0


_SKIP_DIRS = (os.path.dirname(torch.__file__) + os.sep,)


# -- activation: patch while active, restore when the last guard exits -----------------


class _Guard:
    def __init__(self, mode: str):
        self.mode = mode
        self.sites: dict[tuple[str, int], int] = {}  # call site -> how many times seen

    def report(self, api: str) -> None:
        site = user_call_site()
        first = site not in self.sites
        self.sites[site] = self.sites.get(site, 0) + 1
        msg = (
            f"{api}(non_blocking=True) from pageable host memory at {site[0]}:{site[1]}: "
            "the copy is synchronous and blocks the host for its whole duration. Pin the "
            "source (tensor.pin_memory(), DataLoader(pin_memory=True)) or feed batches "
            "through membound.data.prefetch."
        )
        if self.mode == "raise":
            raise PageableCopy(msg)
        if first:
            warnings.warn_explicit(msg, PageableCopyWarning, site[0], site[1])


_lock = threading.Lock()
_active: list[_Guard] = []
_saved: dict[str, Any] = {}
_MISSING = object()


def _current() -> _Guard | None:
    try:
        return _active[-1]
    except IndexError:
        return None


def _wrap_to(orig: Callable) -> Callable:
    @functools.wraps(orig)
    def to(self, *args, **kwargs):
        guard = _current()
        if guard is not None:
            dst, nb = parse_to_args(args, kwargs)
            if is_pageable_async_h2d(self.device.type, dst, nb, self.is_pinned):
                guard.report("Tensor.to")
        return orig(self, *args, **kwargs)

    return to


def _wrap_cuda(orig: Callable) -> Callable:
    @functools.wraps(orig)
    def cuda(self, *args, **kwargs):
        guard = _current()
        if guard is not None:
            dst, nb = parse_cuda_args(args, kwargs)
            if is_pageable_async_h2d(self.device.type, dst, nb, self.is_pinned):
                guard.report("Tensor.cuda")
        return orig(self, *args, **kwargs)

    return cuda


def _wrap_copy_(orig: Callable) -> Callable:
    @functools.wraps(orig)
    def copy_(self, *args, **kwargs):
        guard = _current()
        if guard is not None:
            src = args[0] if args else kwargs.get("src")
            nb = kwargs.get("non_blocking", args[1] if len(args) > 1 else False)
            if hasattr(src, "is_pinned") and is_pageable_async_h2d(
                src.device.type, self.device.type, bool(nb), src.is_pinned
            ):
                guard.report("Tensor.copy_")
        return orig(self, *args, **kwargs)

    return copy_


_WRAPPERS = {"to": _wrap_to, "cuda": _wrap_cuda, "copy_": _wrap_copy_}


def is_patched() -> bool:
    return bool(_saved)


@contextmanager
def strict_copies(mode: str = "warn") -> Iterator[_Guard]:
    """Report non_blocking host→device copies from pageable memory while active.

    mode="warn": a `PageableCopyWarning` once per call site. mode="raise": `PageableCopy`.
    Re-entrant (the innermost guard's mode applies) and global to all threads. Yields the
    guard, whose `.sites` maps (file, line) to how many offending copies it saw there.
    """
    if mode not in _MODES:
        raise BadInput(f"strict_copies mode must be one of {_MODES}, got {mode!r}.")
    guard = _Guard(mode)
    with _lock:
        if not _active:
            for name, wrap in _WRAPPERS.items():
                _saved[name] = torch.Tensor.__dict__.get(name, _MISSING)
                setattr(torch.Tensor, name, wrap(getattr(torch.Tensor, name)))
        _active.append(guard)
    try:
        yield guard
    finally:
        with _lock:
            _active.remove(guard)
            if not _active:
                for name, orig in _saved.items():
                    if orig is _MISSING:
                        delattr(torch.Tensor, name)
                    else:
                        setattr(torch.Tensor, name, orig)
                _saved.clear()
