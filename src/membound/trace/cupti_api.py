"""Record only the CUDA API calls the timeline uses: the timeline pass's lighter mode.

The timeline pass (`ProfilerActivity.CUDA`) has CUPTI record every CUDA runtime and driver
API call. membound's analysis reads few of them: launches, graph launches, memcpys, memsets,
syncs and its own clock anchor (`kineto_names.api_kept`). The rest are `cudaGetErrorString`,
`cudaPeekAtLastError`, `cudaStreamIsCapturing`, `cudaFuncGetAttributes`... (2,025 of the
3,821 runtime records of the DCGAN's 2026-12-05 timeline, which has 1,760 kernels, memcpys
and memsets), and more that the trace never shows: kineto drops the most
frequent runtime calls on export (`cudaGetDevice`, `cudaSetDevice`, `cudaGetLastError`,
`cudaEventCreate`...: its `isBlockListedRuntimeCbid`) and every driver call but
`cuLaunchKernel(Ex)`, after CUPTI has recorded them all. On the H200
(2026-12-02, `benchmarks/probe_cupti_kinds.py`, eager GPT-2) the timeline pass added 13.6% to
the step, 6.9% without driver records and 2.1% without any API record.

CUPTI (12.x on) can switch single API functions off while their kind is on
(`cuptiActivityEnableRuntimeApi` / `cuptiActivityEnableDriverApi`, by callback id). This
module finds the libcupti kineto loaded, names every callback id of the two domains
(`cuptiGetCallbackName`) and switches off every function the analysis does not read. It
must run after the profiler turned the kinds on (switching a kind on again forgets the
per-function choices), so `Capture` calls it once the schedule has left its wait.

It is the default (`defaults.API_RECORDS`, where the measurement is); `Capture(api_records=
"all")` and `membound diagnose --api-records all` record everything.
"""

from __future__ import annotations

import ctypes
import os
import time
from typing import Any

from membound.trace.kineto_names import api_kept, api_name

#: CUpti_CallbackDomain
DRIVER_DOMAIN, RUNTIME_DOMAIN = 1, 2
#: callback ids are dense from 1; the scan stops after this many unnamed ids in a row
MISSES = 64
#: and never goes past this id
MAX_CBID = 8192


def find_libcupti(maps: str = "/proc/self/maps") -> str | None:
    """The path of the libcupti this process has loaded (kineto's), or None."""
    try:
        with open(maps) as f:
            for line in f:
                path = line.split()[-1] if line.strip() else ""
                if "libcupti" in os.path.basename(path):
                    return path
    except OSError:
        return None
    return None


def _bind(lib: Any) -> None:
    """Argument and result types of the three functions used (ctypes guesses ints)."""
    lib.cuptiGetCallbackName.argtypes = [ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p]
    lib.cuptiGetCallbackName.restype = ctypes.c_int
    for fn in (lib.cuptiActivityEnableRuntimeApi, lib.cuptiActivityEnableDriverApi):
        fn.argtypes = [ctypes.c_uint32, ctypes.c_uint8]
        fn.restype = ctypes.c_int


def callback_names(lib: Any, domain: int) -> dict[int, str]:
    """cbid -> function name ("cudaLaunchKernel_v7000") of every callback id of `domain`."""
    names: dict[int, str] = {}
    misses = 0
    for cbid in range(1, MAX_CBID):
        out = ctypes.c_char_p()
        rc = lib.cuptiGetCallbackName(domain, cbid, ctypes.byref(out))
        if rc != 0 or not out.value:
            misses += 1
            if misses >= MISSES:
                break
            continue
        misses = 0
        names[cbid] = out.value.decode("ascii", "replace")
    return names


def keep_launches(lib: Any = None, keep: Any = api_kept) -> dict[str, Any]:
    """Switch off the records of every runtime and driver API function the timeline does not
    read (`keep(cupti_name)` says which it reads: `kineto_names.api_kept` by default). Returns
    what was done, for the capture meta: {"applied": True, "runtime_off": n,
    "driver_off": m, "runtime_kept": [...], "driver_kept": [...]}, or {"applied": False,
    "why": "..."} where it could not be (no libcupti loaded, a CUPTI without per-function
    switches, a call that failed); records are then kept as the profiler made them."""
    if lib is None:
        path = find_libcupti()
        if path is None:
            return {"applied": False, "why": "no libcupti is loaded in this process"}
        try:
            lib = ctypes.CDLL(path)
        except OSError as exc:
            return {"applied": False, "why": f"libcupti could not be opened ({exc})"}
    needed = (
        "cuptiGetCallbackName",
        "cuptiActivityEnableRuntimeApi",
        "cuptiActivityEnableDriverApi",
    )
    missing = [fn for fn in needed if not hasattr(lib, fn)]
    if missing:
        return {"applied": False, "why": f"this CUPTI has no {', '.join(missing)} (CUPTI 12.x on)"}
    _bind(lib)
    t0 = time.perf_counter()
    out: dict[str, Any] = {"applied": False}
    why = []
    for label, domain, switch in (
        ("runtime", RUNTIME_DOMAIN, lib.cuptiActivityEnableRuntimeApi),
        ("driver", DRIVER_DOMAIN, lib.cuptiActivityEnableDriverApi),
    ):
        names = callback_names(lib, domain)
        if not names:
            why.append(f"CUPTI named no {label} API function")
            continue
        kept, off, failed = [], 0, []
        for cbid, name in sorted(names.items()):
            if keep(name):
                kept.append(api_name(name))
                continue
            rc = switch(cbid, 0)
            if rc == 0:
                off += 1
            else:
                failed.append(f"{name} -> {rc}")
        out[f"{label}_off"] = off
        out[f"{label}_kept"] = sorted(set(kept))
        if failed:
            out[f"{label}_refused"] = len(failed)
            why.append(f"CUPTI refused to switch {len(failed)} {label} function(s) off "
                       f"({failed[0]})")  # fmt: skip
        out["applied"] = out["applied"] or off > 0
    if why:
        out["why"] = "; ".join(why)
    out["ms"] = round((time.perf_counter() - t0) * 1e3, 3)  # what it took from the step
    return out
