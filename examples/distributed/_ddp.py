"""Shared set-up of the two DDP examples: the process group from torchrun's environment,
NCCL on GPUs (NVLink multicast off, as the shared machines require), gloo on CPU."""

from __future__ import annotations

import os


def setup():
    """Initialise the default process group; returns (rank, world_size, device)."""
    # before any NCCL initialisation: the shared multi-GPU machines refuse NVLink multicast
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
    import torch
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
        backend = "nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    if "RANK" not in os.environ:  # run by hand without torchrun: a group of one
        os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="29512")
    dist.init_process_group(backend)
    return dist.get_rank(), dist.get_world_size(), device


def teardown():
    import torch.distributed as dist

    if dist.is_initialized():
        # every rank done with every collective before the group goes: gloo can abort
        # ("terminate called without an active exception") when one rank tears down early
        dist.barrier()
        dist.destroy_process_group()
