"""Kineto's naming conventions become typed columns at load time (`trace.model`), so the
analysis never tests an event's name; and the reader registry picks a format by content."""

from __future__ import annotations

import numpy as np
import pytest

from membound.errors import BadInput
from membound.trace import load as load_mod
from membound.trace import model as m
from membound.trace.load import load_trace, register_reader
from support import tracebuilder


def _named(table, trace, name):
    return np.flatnonzero(np.array([trace.names[i] == name for i in table.name]))


def test_copies_calls_roles_and_collectives_are_typed_columns(tmp_path):
    b = tracebuilder.TraceBuilder()
    b.step(7, 0, 1000)
    b.op("ProfilerStep#8", 1000, 10)  # a cpu_op step mark (some torch versions): still a step
    b.dataloader(10, 5)
    b.annotation("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 20, 5)
    b.op("aten::item", 30, 2)
    b.op("aten::to", 40, 2)
    b.op("aten::mm", 50, 2)
    b.annotation("gloo:all_reduce", 60, 3)
    b.op("gloo:all_reduce", 70, 3)  # not an annotation: not a host collective
    b.memcpy(100, 5, 1000, "Pageable")
    b.memcpy(110, 5, 1000, "Pinned")
    b.memcpy(120, 5, 1000, "Pageable", direction="DtoH")
    b.memcpy(130, 5, 1000, "Device", direction="DtoD")
    b.runtime("cudaLaunchKernel", 200, 1)
    b.runtime("cudaStreamSynchronize", 210, 1)
    b.runtime("cudaMemcpyAsync", 220, 1)
    b.runtime("cudaEventRecord", 230, 1)
    b.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", 300, 5)
    b.kernel("ncclDevKernel_Unheard_Of(x)", 310, 5)
    b.kernel("void gemm<float>()", 320, 5)
    t = load_trace(b.write(tmp_path / "t.json"))
    gpu, rt, cpu = t.gpu, t.runtime, t.cpu
    copies = gpu.kind == m.MEMCPY
    assert gpu.direction[copies].tolist() == [m.H2D, m.H2D, m.D2H, m.D2D]
    assert gpu.host_memory[copies].tolist() == [m.PAGEABLE, m.PINNED, m.PAGEABLE, m.NO_HOST]
    assert not gpu.direction[~copies].any() and not gpu.host_memory[~copies].any()
    kernels = gpu.kind == m.KERNEL
    kinds = [m.COLLECTIVE_KINDS[c - 1] if c else None for c in gpu.collective[kernels]]
    assert kinds == ["allreduce", "other", None]
    assert rt.call.tolist() == [m.LAUNCH, m.SYNC, m.MEMCPY_CALL, m.OTHER_CALL]
    role = {t.names[n]: [] for n in cpu.name}
    for n, r in zip(cpu.name, cpu.role, strict=True):
        role[t.names[n]].append(int(r))
    assert role["ProfilerStep#7"] == role["ProfilerStep#8"] == [m.STEP]
    assert role["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"] == [m.DATALOADER]
    assert role["enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"] == [
        m.DATALOADER_WORKERS
    ]
    assert role["aten::item"] == [m.SYNC_OP] and role["aten::to"] == [m.COPY_OP]
    assert role["aten::mm"] == [m.NO_ROLE]
    assert role["gloo:all_reduce"] == [m.HOST_COLLECTIVE, m.NO_ROLE]
    steps = cpu.role == m.STEP
    assert sorted(cpu.step[steps].tolist()) == [7, 8] and (cpu.step[~steps] == -1).all()
    gloo = cpu.role == m.HOST_COLLECTIVE
    assert [m.COLLECTIVE_KINDS[c - 1] for c in cpu.collective[gloo]] == ["allreduce"]
    assert not cpu.collective[~gloo].any()


def test_a_second_reader_is_one_registration(tmp_path, monkeypatch):
    monkeypatch.setattr(load_mod, "READERS", dict(load_mod.READERS))
    seen = []

    def read(path, progress):
        seen.append(path)
        return load_trace(tracebuilder.planted_launch_bound(steps=1).write(tmp_path / "k.json"))

    register_reader("toy", lambda head: head.startswith(b"TOY1"), read)
    with pytest.raises(ValueError, match="already registered"):
        register_reader("toy", lambda head: False, read)
    toy = tmp_path / "trace.toy"
    toy.write_bytes(b"TOY1 anything")
    t = load_trace(toy)
    assert seen == [toy] and t.has_gpu
    other = tmp_path / "x.bin"
    other.write_bytes(b"\x00\x01 not a trace")
    with pytest.raises(BadInput, match="not a kineto trace"):
        load_trace(other)
