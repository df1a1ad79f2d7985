"""`membound diagnose --sleeping-syncs`: make the run's CUDA syncs sleep, so that a thread's
CPU time is its host work.

By default a CUDA sync spins: a thread waiting in `cudaStreamSynchronize` (an `.item()`, a
pageable copy, a GradScaler's inf check) burns its core until the GPU is done, and that
waiting counts as CPU time. In a loop the GPU paces, the launching threads' CPU time is then
about the step whatever their work, with the profiler or without it, and the profiler's cost
to the host cannot be read from it. The calibration of the timeline replay (`analysis.replay`)
cannot read it from the step either (the GPU hides it), so the replayed host work keeps it,
and a what-if of faster GPU work stops at that host work. Measured on an H100 (2026-12-07,
BERT fine-tune, fp32, GPU-paced; `tests/analysis/test_host_work_2026_12_07_h100.py`):

- the loop as run: 64.11 ms/step with spinning syncs, 64.06 with sleeping ones; the
  training thread's CPU 49.77 and 18.00 a step, the autograd thread's 14.25 and 14.27: its
  host work is 32.27 ms/step;
- its diagnose trace replayed to 56.12 ms/step of host work, so TF32 was predicted 8.80
  ms/step where the plain pair measured 27.83;
- diagnosed with sleeping syncs (another host): the launching threads' CPU 38.90 ms/step
  unprofiled and 56.35 profiled. The profiler cost the host 17.45 ms/step, 18 µs a
  recorded call, where the per-call probe after the script (`trace.profiler_cost`) measures
  1-6 µs.

So with this option the analysis takes the profiler's cost from the threads' CPU
(`analysis.step_timing.StepTiming.profiler_host_ms`) and the host's CPU floor needs no
waiting taken off (`analysis.gpu_whatif.host_floor`).

The switch is the primary context's scheduling flag (`CU_CTX_SCHED_BLOCKING_SYNC`, set through
the driver's `cuDevicePrimaryCtxSetFlags` on every device before any context exists: the
capture sets it before the script runs). A sleeping sync wakes on an interrupt, tens of µs
after the GPU is done, so a loop that syncs many times a step may run slower: the whole-run
flag is off unless asked for, and the capture records what was done (`sleeping_syncs` in its
meta: "ok", or why not).

`--syncs sleep-profiled` sleeps only where membound measures host work: the unprofiled steps
before the capture run as the user runs them (their syncs spinning: the step every figure
refers to); `SLEPT_STEPS` more unprofiled steps at the end of the wait, and the recorded
passes, sleep (the phase "slept": its threads' CPU is the host work without the profiler).
The switch is the driver's `cuCtxSetFlags` on the loop's current context (CUDA 12.1 on,
`LiveSwitch`); the flags it found are set back when the passes end, so the steps after the
capture spin again. The meta's `sleeping_syncs_phases` names the phases that slept. It is
`membound diagnose`'s default since 2026-12-07 (`defaults.SYNC_MODES`: on an H100 the driver
switched a live context both ways, and the BERT fine-tune's TF32 and bf16 came within); where
it cannot switch (no CUDA device, `--wait 0`, a driver before 12.1) the syncs spin throughout.
"""

from __future__ import annotations

import ctypes
from typing import Any

from membound.defaults import SYNC_MODES

#: the capture meta's key: "ok", or why the syncs still spin; absent when not asked for
META_KEY = "sleeping_syncs"
#: the meta's key: the capture phases (`trace.step_clock.PHASES`) whose syncs slept; a meta
#: without it whose META_KEY is "ok" slept in all of them
PHASES_KEY = "sleeping_syncs_phases"
#: CUctx_flags: CU_CTX_SCHED_BLOCKING_SYNC, and CU_CTX_SCHED_MASK (the scheduling bits)
SCHED_BLOCKING_SYNC, SCHED_MASK = 0x04, 0x07
#: the phases each sleeping mode of `membound diagnose --syncs` (`defaults.SYNC_MODES`)
#: sleeps in: the whole run; the "slept" steps and the passes (`LiveSwitch`)
SLEEPS_IN = {"sleep": ("unprofiled", "profiled", "after"), "sleep-profiled": ("slept", "profiled")}
#: `sleep-profiled`: unprofiled steps added at the end of the wait, their syncs sleeping: the
#: host work without the profiler. Not the steps after the capture: the profiler's host cost
#: outlasts it there (H100 BERT fine-tune, 2026-12-07, whole run sleeping: the launching
#: threads' CPU 30.79 ms a step before the capture, 44.23 profiled, 43.58 after it)
SLEPT_STEPS = 3


def mode_of(asked: Any) -> str:
    """A `Capture`'s `sleeping_syncs` as one of `SYNC_MODES`: True is "sleep", False or None
    "spin"."""
    if asked is True:
        return "sleep"
    if asked in (False, None):
        return "spin"
    if asked not in SYNC_MODES:
        raise ValueError(f"no such sync mode {asked!r}: one of {', '.join(SYNC_MODES)}")
    return str(asked)


def sleep_syncs(torch: Any | None = None, libcuda: Any | None = None) -> str:
    """Set the blocking-sync flag on every device's primary context; "ok", or one line on why
    not (no CUDA, a context already made, the driver refused). Call before the process's first
    CUDA work; `torch` and `libcuda` are for tests."""
    if torch is None:
        import torch
    if not torch.cuda.is_available():
        return "no CUDA device"
    if torch.cuda.is_initialized():
        return "CUDA was initialised before the capture: a context's flags are set before it"
    try:
        lib = libcuda if libcuda is not None else ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        return f"no CUDA driver library ({exc})"
    rc = lib.cuInit(0)
    if rc != 0:
        return f"cuInit returned {rc}"
    count = ctypes.c_int(0)
    rc = lib.cuDeviceGetCount(ctypes.byref(count))
    if rc != 0:
        return f"cuDeviceGetCount returned {rc}"
    set_flags = (
        getattr(lib, "cuDevicePrimaryCtxSetFlags_v2", None) or lib.cuDevicePrimaryCtxSetFlags
    )
    failed = []
    for i in range(count.value):
        dev = ctypes.c_int(0)
        rc = lib.cuDeviceGet(ctypes.byref(dev), i)
        if rc == 0:
            rc = set_flags(dev, ctypes.c_uint(SCHED_BLOCKING_SYNC))
        if rc != 0:
            failed.append(f"device {i}: {rc}")
    if failed:
        return "the driver refused the flag (" + ", ".join(failed) + ")"
    return "ok" if count.value else "no CUDA device"


class LiveSwitch:
    """The syncs of the calling thread's current context, switched to sleeping and back while
    the process runs (`cuCtxSetFlags`, CUDA 12.1 on): the context is the loop's, made by the
    script, and the switch applies to every thread's syncs on it. `libcuda` is for tests."""

    def __init__(self, libcuda: Any | None = None) -> None:
        self._lib = libcuda
        self.saved: int | None = None  # the context's flags before `sleep`, until `restore`

    def _driver(self) -> Any:
        if self._lib is None:
            self._lib = ctypes.CDLL("libcuda.so.1")
        return self._lib

    def sleep(self) -> str:
        """Make the current context's syncs sleep; "ok", or one line on why not."""
        try:
            lib = self._driver()
        except OSError as exc:
            return f"no CUDA driver library ({exc})"
        get, put = getattr(lib, "cuCtxGetFlags", None), getattr(lib, "cuCtxSetFlags", None)
        if get is None or put is None:
            return "the CUDA driver has no cuCtxSetFlags (CUDA 12.1 on)"
        flags = ctypes.c_uint(0)
        rc = get(ctypes.byref(flags))
        if rc != 0:
            return f"cuCtxGetFlags returned {rc} (no current context on the loop's thread?)"
        rc = put(ctypes.c_uint((flags.value & ~SCHED_MASK) | SCHED_BLOCKING_SYNC))
        if rc != 0:
            return f"cuCtxSetFlags returned {rc}"
        self.saved = flags.value
        now = ctypes.c_uint(0)
        if get(ctypes.byref(now)) != 0 or now.value & SCHED_MASK != SCHED_BLOCKING_SYNC:
            self.restore()
            return f"the context kept its scheduling flags ({now.value:#x})"
        return "ok"

    def restore(self) -> str | None:
        """Set back the flags `sleep` found: "ok", why not, or None where nothing was set."""
        if self.saved is None:
            return None
        saved, self.saved = self.saved, None
        rc = self._driver().cuCtxSetFlags(ctypes.c_uint(saved))
        return "ok" if rc == 0 else f"cuCtxSetFlags returned {rc}"


def slept_phases(meta: Any) -> tuple[str, ...]:
    """The capture phases whose syncs slept in the capture behind `meta` (() where none)."""
    if not isinstance(meta, dict) or meta.get(META_KEY) != "ok":
        return ()
    phases = meta.get(PHASES_KEY)
    if phases is None:  # --sleeping-syncs before the phases were kept: the whole run
        return SLEEPS_IN["sleep"]
    return tuple(str(p) for p in phases) if isinstance(phases, list | tuple) else ()


def slept(meta: Any) -> bool:
    """Whether the capture behind `meta` ran with sleeping syncs, in any phase."""
    return bool(slept_phases(meta))
