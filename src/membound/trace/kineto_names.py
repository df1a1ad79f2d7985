"""Kineto's naming conventions, turned into the typed columns of `trace.model` at load time
(`classify`), so no analysis tests an event's name.

A memcpy's direction and host memory come from its name ("Memcpy HtoD (Pageable -> Device)");
a runtime call is a launch ("...Launch..."), a sync (`SYNC_RUNTIME`) or a memcpy
("...emcpy..."); host events are step marks ("ProfilerStep#N"), DataLoader `__next__` spans
(with or without worker processes), syncing ops (`SYNC_OPS`), copy ops (`COPY_OPS`) or gloo
collectives; NCCL kernels are collectives of the kind their name says (`collective_kind`).
"""

from __future__ import annotations

import re

import numpy as np

from membound.trace.marks import ANCHOR_CALL
from membound.trace.model import (
    COLLECTIVE_KINDS,
    COPY_OP,
    D2D,
    D2H,
    DATALOADER,
    DATALOADER_WORKERS,
    GRAPH_LAUNCH,
    H2D,
    HOST_COLLECTIVE,
    KERNEL,
    LAUNCH,
    MEMCPY,
    MEMCPY_CALL,
    NO_COPY,
    NO_HOST,
    NO_ROLE,
    OTHER_CALL,
    OTHER_COPY,
    PAGEABLE,
    PINNED,
    STEP,
    SYNC,
    SYNC_OP,
    USER_ANNOTATION,
)  # fmt: skip

STEP_PREFIX = "ProfilerStep#"
SYNC_RUNTIME = (
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "cudaEventSynchronize",
    "cuStreamSynchronize",
    "cuCtxSynchronize",
    "cuEventSynchronize",
)
SYNC_OPS = ("aten::item", "aten::_local_scalar_dense")
COPY_OPS = ("aten::copy_", "aten::to", "aten::_to_copy", "aten::_copy_from")
HOST_COLLECTIVE_PREFIXES = ("gloo:",)
_NCCL_KERNEL_PREFIXES = ("ncclDevKernel", "ncclKernel")


def collective_kind(name: str) -> str:
    """Normalised collective name: 'ncclDevKernel_AllReduce_Sum_f32_RING_LL(...)',
    'nccl:all_reduce', 'gloo:all_reduce', 'allreduce_coalesced' -> 'allreduce'; 'other'
    for a collective of none of `COLLECTIVE_KINDS`."""
    n = name.lower()
    for prefix in ("nccldevkernel_", "ncclkernel_", "nccl:", "gloo:", "c10d::"):
        if n.startswith(prefix):
            n = n[len(prefix) :]
            break
    n = n.split("(", 1)[0].replace("_", "")
    return next((kind for kind in COLLECTIVE_KINDS if n.startswith(kind)), "other")


def _copy_of(name: str) -> tuple[int, int]:
    """(direction, host memory) of a memcpy named like kineto's 'Memcpy HtoD (Pinned -> Device)'."""
    direction = (
        H2D if "HtoD" in name else D2H if "DtoH" in name else D2D if "DtoD" in name else OTHER_COPY
    )
    host = PAGEABLE if "Pageable" in name else PINNED if "Pinned" in name else NO_HOST
    return direction, host


def _call_of(name: str) -> int:
    if "GraphLaunch" in name:  # cudaGraphLaunch, cuGraphLaunch: a whole replay
        return GRAPH_LAUNCH
    if "Launch" in name:  # cudaLaunchKernel, cuLaunchKernel(Ex), ...
        return LAUNCH
    if name in SYNC_RUNTIME:
        return SYNC
    if "emcpy" in name:  # cudaMemcpy, cudaMemcpyAsync, cuMemcpyHtoDAsync_v2, ...
        return MEMCPY_CALL
    return OTHER_CALL


#: API functions recorded in the timeline pass's lighter mode (`trace.cupti_api`) besides
#: those `_call_of` classifies: memsets (their GPU work is launched by them), the clock's
#: anchor, and the allocator's calls (rare, and cudaFree waits for the device)
_API_ALSO_KEPT = ("cudaMalloc", "cudaFree", "cudaMallocHost", "cudaFreeHost", "cudaHostAlloc",
                  "cudaHostRegister", "cudaHostUnregister", "cuMemAlloc", "cuMemFree",
                  "cuMemHostAlloc", "cuMemFreeHost", "cuMemHostRegister",
                  "cuMemHostUnregister")  # fmt: skip
_API_SUFFIX = re.compile(r"(_v\d+|_ptsz|_ptds)+$")


def api_name(cupti_name: str) -> str:
    """A CUPTI callback name as kineto writes it: 'cudaLaunchKernel_ptsz_v7000' ->
    'cudaLaunchKernel', 'cuMemcpyHtoDAsync_v2' -> 'cuMemcpyHtoDAsync'."""
    return _API_SUFFIX.sub("", cupti_name)


def api_kept(cupti_name: str) -> bool:
    """Whether the timeline reads records of this runtime or driver API function: launches,
    graph launches, syncs and memcpys (`_call_of`), memsets, the clock anchor and the
    allocator's calls."""
    name = api_name(cupti_name)
    return (
        _call_of(name) != OTHER_CALL
        or "emset" in name
        or name == ANCHOR_CALL
        or name in _API_ALSO_KEPT
    )


def _role_of(name: str) -> int:
    if name.startswith(STEP_PREFIX):
        return STEP
    if "DataLoader" in name and "__next__" in name:
        return DATALOADER_WORKERS if "MultiProcessing" in name else DATALOADER
    if name in SYNC_OPS:
        return SYNC_OP
    if name in COPY_OPS:
        return COPY_OP
    if name.startswith(HOST_COLLECTIVE_PREFIXES):
        return HOST_COLLECTIVE
    return NO_ROLE


def _step_number(name: str) -> int:
    suffix = name[len(STEP_PREFIX) :] if name.startswith(STEP_PREFIX) else ""
    return int(suffix) if suffix.isdigit() else -1


def classify(names: list[str], cpu: dict, runtime: dict, gpu: dict) -> None:
    """Add the typed columns (`trace.model`) to frozen column dicts, in place: each interned
    name is judged once, then looked up per event."""
    n = max(len(names), 1)
    direction = np.zeros(n, np.int8)
    host = np.zeros(n, np.int8)
    collective = np.zeros(n, np.int8)
    call = np.zeros(n, np.int8)
    role = np.zeros(n, np.int8)
    step = np.full(n, -1, np.int64)
    for i, name in enumerate(names):
        direction[i], host[i] = _copy_of(name)
        call[i] = _call_of(name)
        role[i] = _role_of(name)
        step[i] = _step_number(name)
        if name.startswith(_NCCL_KERNEL_PREFIXES) or role[i] == HOST_COLLECTIVE:
            collective[i] = 1 + COLLECTIVE_KINDS.index(collective_kind(name))
    memcpy = gpu["kind"] == MEMCPY
    gname = gpu["name"]
    gpu["direction"] = np.where(memcpy, direction[gname], NO_COPY).astype(np.int8)
    gpu["host_memory"] = np.where(memcpy, host[gname], NO_HOST).astype(np.int8)
    gpu["collective"] = np.where(gpu["kind"] == KERNEL, collective[gname], 0).astype(np.int8)
    runtime["call"] = call[runtime["name"]]
    r = role[cpu["name"]]
    # step marks and gloo spans are annotations; a cpu_op of those names is something else
    annotation = cpu["kind"] == USER_ANNOTATION
    r = np.where(((r == STEP) | (r == HOST_COLLECTIVE)) & ~annotation, NO_ROLE, r)
    cpu["role"] = r.astype(np.int8)
    cpu["step"] = np.where(r == STEP, step[cpu["name"]], -1)
    cpu["collective"] = np.where(r == HOST_COLLECTIVE, collective[cpu["name"]], 0).astype(np.int8)
