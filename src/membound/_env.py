"""Every environment variable membound reads or sets, in one place."""

from __future__ import annotations

import os
from pathlib import Path

#: Overrides the directory where measured ceilings are cached.
CACHE_DIR_VAR = "MEMBOUND_CACHE_DIR"
#: Set to 1 to disable Triton kernels and always use the PyTorch reference path.
DISABLE_TRITON_VAR = "MEMBOUND_DISABLE_TRITON"
#: Triton's own switch for its CPU interpreter; read to know whether kernels can run on CPU.
TRITON_INTERPRET_VAR = "TRITON_INTERPRET"
#: The largest single event (or run of bytes without an event boundary) a trace may hold,
#: in MiB, before the loader refuses it (default 64, `trace.jsonstream.DEFAULT_MAX_EVENT_MB`;
#: 0: no limit).
MAX_EVENT_MB_VAR = "MEMBOUND_MAX_EVENT_MB"
#: How many times its size a compressed (gzip or xz) trace may expand past 2 GiB before the
#: loader refuses it as a likely compression bomb (default 100; 0: no limit).
MAX_GZIP_RATIO_VAR = "MEMBOUND_MAX_GZIP_RATIO"
#: Set (unless the user set them) before any NCCL initialisation in a process membound
#: starts or runs: the shared multi-GPU machines refuse NVLink multicast.
NCCL_SAFE_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


def cache_dir() -> Path:
    override = os.environ.get(CACHE_DIR_VAR)
    if override:
        return Path(override)
    try:
        from platformdirs import user_cache_dir
    except ImportError:  # a dependency, but absent on some curated GPU images
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        return Path(base) / "membound"
    return Path(user_cache_dir("membound"))


def triton_disabled() -> bool:
    return os.environ.get(DISABLE_TRITON_VAR, "") not in ("", "0")


def triton_interpret() -> bool:
    return os.environ.get(TRITON_INTERPRET_VAR, "") not in ("", "0")


def nccl_safe_env(env: dict | None = None) -> dict:
    """`env` (default os.environ, changed in place) with NVLink multicast off; keeps values
    the user set explicitly."""
    env = os.environ if env is None else env
    for key, value in NCCL_SAFE_ENV.items():
        env.setdefault(key, value)
    return env
