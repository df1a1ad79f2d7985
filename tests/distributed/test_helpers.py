"""Rank-aware capture helpers, collective records read from trace files, bus bandwidth."""

from __future__ import annotations

import json

import pytest

from membound import _env
from membound.device import cache, interconnect
from membound.device.ceilings import Ceilings
from membound.device.lookup import interconnect_for
from membound.trace import distributed as d
from membound.trace.kineto_names import collective_kind
from support import multirank


def test_rank_info_from_torchrun_env():
    info = d.rank_info({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"})
    assert (info.rank, info.world_size, info.local_rank, info.distributed) == (3, 4, 1, True)
    assert not d.rank_info({}).distributed
    assert d.rank_info({"RANK": "x", "WORLD_SIZE": ""}).world_size == 1


def test_names_and_rank_of_path():
    assert d.trace_name(2) == "trace.rank2.json.gz" and d.trace_name(None) == "trace.json.gz"
    assert d.meta_name(0) == "capture.rank0.json"
    assert d.rank_of_path("/x/trace.rank12.json.gz") == 12
    assert d.rank_of_path("run_rank-3.pt.trace.json") == 3
    assert d.rank_of_path("trace.json.gz") is None


def test_strip_nproc_and_torchrun_command():
    argv = [
        "diagnose",
        "--nproc-per-node",
        "2",
        "--steps",
        "3",
        "--",
        "t.py",
        "--nproc-per-node",
        "9",
    ]
    assert d.strip_nproc(argv) == [
        "diagnose",
        "--steps",
        "3",
        "--",
        "t.py",
        "--nproc-per-node",
        "9",
    ]
    assert d.strip_nproc(["--nproc-per-node=4", "-x"]) == ["-x"]
    cmd = d.torchrun_command(2, ["diagnose", "--", "t.py"])
    assert cmd[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    assert cmd[-4:] == ["membound", "diagnose", "--", "t.py"]


def test_nccl_safe_env_keeps_user_values():
    env = _env.nccl_safe_env({"NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "7"})
    assert env["NCCL_NVLS_ENABLE"] == "0" and env["NVSHMEM_DISABLE_NVLS"] == "7"
    assert env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"


@pytest.mark.parametrize(
    "name,kind",
    [
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "allreduce"),
        ("ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)", "allgather"),
        ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", "reducescatter"),
        ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "sendrecv"),
        ("nccl:all_reduce", "allreduce"),
        ("gloo:all_reduce", "allreduce"),
        ("gloo:broadcast", "broadcast"),
        ("allreduce_coalesced", "allreduce"),
        ("ncclDevKernel_Mystery(x)", "other"),
    ],
)
def test_collective_kind(name, kind):
    assert collective_kind(name) == kind


def test_dtype_sizes():
    assert d.dtype_size("Float") == 4 and d.dtype_size("c10::BFloat16") == 2
    assert d.dtype_size("torch.float16") == 2 and d.dtype_size("Long") == 8
    assert d.dtype_size("mystery") is None and d.dtype_size(None) is None


@pytest.mark.parametrize("layout", ["kineto", "compact"])
def test_read_comm_records_and_info(tmp_path, layout):
    b = multirank.straggler(1, 2)
    path = b.write(tmp_path / f"t.{layout}.json.gz", layout=layout)
    recs = d.read_comm_records(path)
    assert len(recs) == 3
    assert all(r.name == "allreduce" and r.bytes == 100_000_000 for r in recs)
    assert [r.group_size for r in recs] == [2, 2, 2]
    assert recs == sorted(recs, key=lambda r: r.ts)
    info = d.read_distributed_info(path)
    assert info == {"backend": "nccl", "rank": 1, "world_size": 2}


def test_read_comm_records_across_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(d, "_CHUNK", 700)  # every event straddles a chunk boundary somewhere
    path = multirank.exposed(0, 2, steps=5).write(tmp_path / "t.json")
    recs = d.read_comm_records(path)
    assert [r.nelems for r in recs] == [100_000_000] * 5


def test_kernel_args_win_over_host_records(tmp_path):
    """Newer kineto writes the sizes on the NCCL kernel: those are used, matched by time."""
    b = multirank.exposed(0, 2, steps=2)
    for ev in b.events:
        if ev["cat"] == "kernel" and ev["name"].startswith("ncclDevKernel"):
            ev["args"].update({"In msg nelems": 1000, "Out msg nelems": 1000, "dtype": "BFloat16"})
    recs = d.read_comm_records(b.write(tmp_path / "t.json.gz"))
    assert [(r.on_kernel, r.bytes) for r in recs] == [(True, 2000), (True, 2000)]
    from membound.analysis import analyze

    a = analyze(tmp_path / "t.json.gz")
    f = next(f for f in a.findings if f.code == "exposed-communication")
    assert f.evidence["collectives"][0]["bytes_per_call"] == 2000


def test_wait_for_ranks(tmp_path):
    (tmp_path / d.meta_name(0)).write_text("{}")
    traces, missing = d.wait_for_ranks(tmp_path, 2, since=0.0, timeout_s=0.3)
    assert missing == [1] and traces == []
    (tmp_path / d.trace_name(0)).write_bytes(b"x")
    (tmp_path / d.meta_name(1)).write_text("{}")
    traces, missing = d.wait_for_ranks(tmp_path, 2, since=0.0, timeout_s=0.3)
    assert missing == [] and [t.name for t in traces] == ["trace.rank0.json.gz"]
    d.clear_stale(tmp_path, 0)
    assert not (tmp_path / d.trace_name(0)).exists() and not (tmp_path / d.meta_name(0)).exists()


def test_capture_names_trace_by_rank(tmp_path, monkeypatch):
    from membound.trace.capture import Capture

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    c = Capture(out=tmp_path)
    assert c.trace_path.name == "trace.rank1.json.gz"
    assert c.meta_path.name == "capture.rank1.json"
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert Capture(out=tmp_path).trace_path.name == "trace.json.gz"


def test_bus_factor():
    assert interconnect.bus_factor("allreduce", 2) == 1.0
    assert interconnect.bus_factor("allreduce", 8) == pytest.approx(1.75)
    assert interconnect.bus_factor("allgather", 4) == pytest.approx(0.75)
    assert interconnect.bus_factor("broadcast", 8) == 1.0
    assert interconnect.bus_factor("allreduce", 1) == 1.0


def _cache_interconnect(ic, *, quick=False, measured_at="2026-11-29T00:00:00+00:00"):
    """Cache ceilings of ic.name carrying `ic` as their GPU<->GPU figures."""
    c = Ceilings(device="cuda", name=ic.name, memory_bandwidth=4e12, interconnect=ic.to_dict())
    c.key, c.measured_at = {"name": ic.name, "quick": quick, "gpus": ic.gpus}, measured_at
    cache.save(c)


def test_interconnect_figures_come_from_the_ceilings_then_the_ceilings_cache(tmp_path):
    ic = interconnect.Interconnect(name="NVIDIA H200", gpus=2, peer_copy_bandwidth=3e11)
    assert interconnect_for(None, "NVIDIA H200") == (None, None)
    _cache_interconnect(ic)
    # a newer one-GPU measurement of the same name (no interconnect) does not hide it
    one = Ceilings(device="cuda", name="NVIDIA H200", memory_bandwidth=4e12)
    one.key, one.measured_at = {"name": "NVIDIA H200", "gpus": 1}, "2026-12-01T00:00:00+00:00"
    cache.save(one)
    assert interconnect_for(None, "NVIDIA H200") == (ic, "ceilings cache")
    assert interconnect_for(None, "other") == (None, None)
    own = interconnect.Interconnect(name="NVIDIA H200", gpus=8, peer_copy_bandwidth=4e11)
    with_own = Ceilings(device="cuda", name="NVIDIA H200", memory_bandwidth=4e12)
    with_own.interconnect = own.to_dict()
    assert interconnect_for(with_own, "NVIDIA H200") == (own, "ceilings")
    assert json.loads(json.dumps(ic.to_dict()))["peer_copy_bandwidth"] == 3e11


def test_interconnect_steps_registered_and_skip_without_two_gpus():
    from membound.device import measure

    keys = {s.key: s for s in measure.STEPS if s.device == "cuda"}
    assert {"p2p", "allreduce"} <= set(keys)
    import torch

    if torch.cuda.device_count() >= 2:
        pytest.skip("this machine has two GPUs")
    with pytest.raises(measure.Skip, match="two GPUs"):
        keys["p2p"].fn(None, None)


@pytest.mark.gpu
def test_interconnect_measures_on_two_gpus():
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    from types import SimpleNamespace

    from membound.device import measure

    keys = {s.key: s for s in measure.STEPS if s.device == "cuda"}
    c = SimpleNamespace(name=torch.cuda.get_device_name(0), interconnect=None)
    plan = SimpleNamespace(mem_bytes=256 << 20, rep_ms=30.0)  # a quick plan
    keys["p2p"].fn(c, plan)
    keys["allreduce"].fn(c, plan)
    ic = interconnect.Interconnect.from_dict(c.interconnect)
    assert ic.peer_copy_bandwidth and ic.peer_copy_bandwidth > 1e9
    assert ic.allreduce_bus_bandwidth and ic.allreduce_bus_bandwidth > 1e9, ic.notes
    sizes = ic.allreduce_sizes()
    assert [s for s, _ in sizes] == list(interconnect.QUICK_SWEEP_BYTES), ic.notes
    assert ic.allreduce_bytes == max(interconnect.QUICK_SWEEP_BYTES)
    assert all(bw > 1e9 for _, bw in sizes)


def test_allreduce_measurement_machinery_on_cpu(monkeypatch):
    """The spawned process group and the timing, with gloo on CPU (NCCL on the GPU run)."""
    import os

    import torch.distributed as dist

    if not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("no gloo")
    for key in _env.NCCL_SAFE_ENV:
        monkeypatch.delenv(key, raising=False)  # restored after the test
    sweep = interconnect.allreduce_sweep(2, (1 << 20, 1 << 16), 3, backend="gloo")
    assert sorted(sweep) == [1 << 16, 1 << 20]  # one process group measured both sizes
    assert all(1e5 < bw < 1e12 for bw in sweep.values())
    assert os.environ["NCCL_NVLS_ENABLE"] == "0"  # set before any process group starts
    ic = interconnect.Interconnect(name="cpu", gpus=2)
    interconnect._set_sweep(ic, sweep, 2)
    assert (ic.allreduce_bytes, ic.allreduce_ranks) == (1 << 20, 2)
    assert ic.allreduce_bus_bandwidth == sweep[1 << 20]
    assert ic.allreduce_sizes() == sorted(sweep.items())


def test_allreduce_ceiling_at_or_above_the_collectives_size():
    mib = 1 << 20
    by_size = {str(4 * mib): 100e9, str(64 * mib): 250e9, str(16 * mib): 180e9}
    ic = interconnect.Interconnect(
        name="NVIDIA H200", gpus=2, allreduce_bus_bandwidth_by_size=by_size
    )
    assert ic.allreduce_ceiling(1) == (100e9, 4 * mib)
    assert ic.allreduce_ceiling(4 * mib) == (100e9, 4 * mib)
    assert ic.allreduce_ceiling(4 * mib + 1) == (180e9, 16 * mib)
    assert ic.allreduce_ceiling(64 * mib) == (250e9, 64 * mib)
    # larger than the sweep: the largest size's figure (the caller notes the gap)
    assert ic.allreduce_ceiling(256 * mib) == (250e9, 64 * mib)
    assert ic.allreduce_ceiling(None) == (250e9, 64 * mib)
    # JSON keys are strings; the cache round trip keeps the lookup
    _cache_interconnect(ic)
    cached, _ = interconnect_for(None, "NVIDIA H200")
    assert cached.allreduce_ceiling(5 * mib) == (180e9, 16 * mib)
    # files from before the sweep: one figure, for every size
    old = interconnect.Interconnect.from_dict(
        {"name": "x", "gpus": 2, "allreduce_bus_bandwidth": 2e11, "allreduce_bytes": 32 * mib}
    )
    assert old.allreduce_ceiling(64 * mib) == (2e11, 32 * mib)
    bare = interconnect.Interconnect(name="x", gpus=2, allreduce_bus_bandwidth=2e11)
    assert bare.allreduce_ceiling(mib) == (2e11, None)
    assert interconnect.Interconnect(name="x", gpus=2).allreduce_ceiling(mib) == (None, None)


def test_roofline_allreduce_step_stores_the_sweep(monkeypatch):
    """The `membound roofline` step (2+ GPUs) on CPU with the measurement stubbed: the quick
    plan sweeps QUICK_SWEEP_BYTES, and the ceilings get every size."""
    from types import SimpleNamespace

    import torch

    steps = {}

    def step(device, key, label):
        return lambda fn: steps.setdefault(key, fn)

    interconnect.register(step, RuntimeError)
    asked = []

    def sweep(world, sizes, iters, backend="nccl"):
        asked.append((world, sizes, iters))
        return {s: 1e11 * (i + 1) for i, s in enumerate(sizes)}

    monkeypatch.setattr(interconnect, "allreduce_sweep", sweep)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    c = SimpleNamespace(name="NVIDIA H200", interconnect=None)
    steps["allreduce"](c, SimpleNamespace(mem_bytes=400 << 20, rep_ms=30.0))
    assert asked == [(2, interconnect.QUICK_SWEEP_BYTES, 10)]
    by_size = {str(16 << 20): 1e11, str(64 << 20): 2e11}
    assert c.interconnect["allreduce_bus_bandwidth_by_size"] == by_size
    assert c.interconnect["allreduce_bytes"] == 64 << 20
    ic = interconnect.Interconnect.from_dict(c.interconnect)
    assert (ic.name, ic.gpus) == ("NVIDIA H200", 2) and ic.measured_at
    assert ic.allreduce_ceiling(20 << 20) == (2e11, 64 << 20)
    # a full plan with a small buffer measures only the sizes that fit
    steps["allreduce"](c, SimpleNamespace(mem_bytes=64 << 20, rep_ms=100.0))
    assert asked[-1] == (2, (4 << 20, 16 << 20, 64 << 20), 20)


def _one_event_a_line(path, b):
    doc = b.document()
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    lines = [json.dumps(head)[:-1] + ', "traceEvents": [']
    evs = doc["traceEvents"]
    lines += [json.dumps(e) + ("," if i < len(evs) - 1 else "") for i, e in enumerate(evs)]
    path.write_text("\n".join(lines + ["]}"]))
    return path


@pytest.mark.parametrize("span", [None, 64])
def test_single_line_events_are_read_from_near_their_hit(tmp_path, monkeypatch, span):
    """A trace with one event a line (not kineto's `  {` layout) has each collective's event
    found from its opening `{"ph"` near the hit, decoding that event's bytes, not the rest of
    the 16 MiB chunk for every hit (which made 437 all-reduces in 10 MB cost 2.7 s); an event
    longer than the span (here 64 bytes) is still found."""
    if span is not None:
        monkeypatch.setattr(d, "_EVENT_SPAN", span)
    decoded = []

    class Counting(json.JSONDecoder):
        def raw_decode(self, s, idx=0):
            decoded.append(len(s))
            return super().raw_decode(s, idx)

    monkeypatch.setattr(d.json, "JSONDecoder", Counting)
    path = _one_event_a_line(tmp_path / "t.json", multirank.exposed(0, 2, steps=200))
    assert path.stat().st_size > 100_000
    recs = d.read_comm_records(path)
    assert [r.nelems for r in recs] == [100_000_000] * 200
    if span is None:  # every decode held about one event, never the file's remainder
        assert max(decoded) <= 2 * d._EVENT_SPAN < path.stat().st_size


@pytest.mark.parametrize("layout", ["compact", "lines"])
def test_a_single_line_trace_is_read_chunk_by_chunk(tmp_path, monkeypatch, layout):
    """A trace with no kineto `  {` line used to be carried whole from chunk to chunk (the
    whole file in memory, copied once a chunk) and scanned at the end; it is now cut at the
    last event opening of each chunk, so what is carried stays about a chunk."""
    monkeypatch.setattr(d, "_CHUNK", 4096)
    sizes = []
    scan = d._scan

    def spy(buf, out, seen, final):
        sizes.append(len(buf))
        return scan(buf, out, seen, final)

    monkeypatch.setattr(d, "_scan", spy)
    b = multirank.exposed(0, 2, steps=60)
    path = tmp_path / "t.json"
    if layout == "compact":
        path = b.write(path, layout="compact")
    else:
        path = _one_event_a_line(path, b)
    recs = d.read_comm_records(path)
    assert [r.nelems for r in recs] == [100_000_000] * 60
    assert path.stat().st_size > 20 * 4096 and max(sizes) < 3 * 4096
