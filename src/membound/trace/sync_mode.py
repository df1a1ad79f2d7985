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
after the GPU is done, so a loop that syncs many times a step may run slower: the flag is off
unless asked for, and the capture records what was done (`sleeping_syncs` in its meta: "ok",
or why not).
"""

from __future__ import annotations

import ctypes
from typing import Any

#: the capture meta's key: "ok", or why the syncs still spin; absent when not asked for
META_KEY = "sleeping_syncs"
#: CUctx_flags: CU_CTX_SCHED_BLOCKING_SYNC
SCHED_BLOCKING_SYNC = 0x04


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


def slept(meta: Any) -> bool:
    """Whether the capture behind `meta` ran with sleeping syncs."""
    return isinstance(meta, dict) and meta.get(META_KEY) == "ok"
