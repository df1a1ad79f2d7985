"""Cached direct launch of compiled Triton kernels: skips `JITFunction.run`'s per-call binder.

`kernel[grid](*args, **constexprs)` re-binds and re-specializes ~25 arguments per call (and
reads knobs, hooks, caches) before it reaches the compiled launcher. After the first normal
launch for a given specialization, Triton has a `CompiledKernel`; `compiled[grid]` gives its
launcher, which we call directly on later calls with the same specialization key.

This relies on internals that differ across Triton versions, so it is used only when the
installed `JITFunction.run` hands the launcher every parameter in signature order
(`*bound_args.values()`, Triton >= 3.3, incl. 3.6 and 3.9) and the first launch returned an
object with `__getitem__`; otherwise every call takes the normal path (`stats` counts both).

The key must capture everything Triton specializes on, or a kernel compiled for aligned
pointers could run on unaligned ones: for tensors dtype and 16-byte alignment, for ints
value == 1, divisibility by 16 and the 32/64-bit range, plus constexprs, warps, stages, grid
and the device of the first tensor.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass

import torch

#: set False to force the normal `kernel[grid](...)` path (benchmarks compare both)
ENABLED = True

#: calls per path since import (tests and the launch-overhead benchmark read it)
stats = {"direct": 0, "normal": 0}

_RUNNERS: dict = {}
_MAX_RUNNERS = 4096


@functools.lru_cache(maxsize=1)
def launcher_takes_all_args() -> bool:
    """True when this Triton's JITFunction.run passes all bound args to the launcher."""
    try:
        from triton.runtime.jit import JITFunction

        return "*bound_args.values()" in inspect.getsource(JITFunction.run)
    except Exception:  # noqa: BLE001 - any surprise means: don't try the direct path
        return False


def _spec(v):
    # hot path (runs per argument per call): exact type tests first, then tensors
    t = type(v)
    if t is int:
        return (v == 1, v & 15 == 0, -(2**31) <= v < 2**31)
    if t is float or v is None:
        return None
    if isinstance(v, torch.Tensor):
        return (v.dtype, v.data_ptr() & 15 == 0)
    return t  # anything else (bool, ...): its type


def launch(kernel, grid: tuple, args: tuple, constexprs: dict, num_warps: int, num_stages: int):
    """`kernel[grid](*args, **constexprs, num_warps=, num_stages=)`, direct when possible.

    `args` are the leading non-constexpr parameters, `constexprs` the rest (by name). Returns
    the cached (launcher, constexpr names in order) used or made for this call, or None."""
    key = None
    if ENABLED:
        # the device too: a compiled kernel is loaded per device (multi-GPU processes)
        dev = args[0].get_device() if isinstance(args[0], torch.Tensor) else -1
        key = (id(kernel), dev, grid, num_warps, num_stages, *constexprs.values())
        key += tuple(map(_spec, args))
        entry = _RUNNERS.get(key)
        if entry is not None:
            runner, order = entry
            try:
                runner(*args, *[constexprs[n] for n in order])
                stats["direct"] += 1
                return entry
            except Exception:  # noqa: BLE001 - launcher convention differs: never again
                _disable()
    stats["normal"] += 1
    compiled = kernel[grid](*args, **constexprs, num_warps=num_warps, num_stages=num_stages)
    if key is None:
        return None
    entry = _make_runner(kernel, compiled, grid, len(args), constexprs)
    if entry is not None:
        _store(key, entry)
    return entry


@dataclass(frozen=True)
class Plan:
    """One launch whose specialization the caller has fixed: `key` (hashable, unique to the
    caller) must determine every int argument's value class, every tensor's dtype, the
    constexprs, grid, warps, stages and device; only pointer alignment is left, checked per
    call over the tensors at `tensor_pos`. The hot path is then one dict lookup."""

    key: tuple
    kernel: object
    grid: tuple
    constexprs: dict
    num_warps: int
    num_stages: int
    tensor_pos: tuple


def launch_planned(plan: Plan, args: tuple) -> None:
    """`launch` for a `Plan`: no per-argument key when every tensor is 16-byte aligned."""
    ptrs = 0
    for i in plan.tensor_pos:
        ptrs |= args[i].data_ptr()
    aligned = not ptrs & 15
    if ENABLED and aligned:
        entry = _RUNNERS.get(plan.key)
        if entry is not None:
            runner, values = entry
            try:
                runner(*args, *values)
                stats["direct"] += 1
                return
            except Exception:  # noqa: BLE001 - launcher convention differs: never again
                _disable()
    entry = launch(plan.kernel, plan.grid, args, plan.constexprs, plan.num_warps, plan.num_stages)
    if entry is not None and aligned and ENABLED:
        runner, order = entry
        _store(plan.key, (runner, tuple(plan.constexprs[n] for n in order)))


def _store(key, entry) -> None:
    if len(_RUNNERS) >= _MAX_RUNNERS:  # many distinct shapes: start over, stay bounded
        _RUNNERS.clear()
    _RUNNERS[key] = entry


def _make_runner(kernel, compiled, grid, n_args, constexprs):
    """(launcher, constexpr names in signature order) or None when unsupported."""
    if compiled is None or not hasattr(type(compiled), "__getitem__"):
        return None  # e.g. the interpreter returns nothing
    names = getattr(kernel, "arg_names", None)
    if names is None or not launcher_takes_all_args():
        return None
    order = list(names[n_args:])
    if len(names) != n_args + len(constexprs) or set(order) != set(constexprs):
        return None
    g = tuple(grid) + (1,) * (3 - len(grid))
    try:
        return compiled[g], order
    except Exception:  # noqa: BLE001 - internal API changed: keep the normal path
        return None


def _disable() -> None:
    global ENABLED
    ENABLED = False
    stats["failed"] = stats.get("failed", 0) + 1
    _RUNNERS.clear()


def clear() -> None:
    _RUNNERS.clear()
    stats.clear()
    stats.update(direct=0, normal=0)
