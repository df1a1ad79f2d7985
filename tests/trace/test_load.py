"""Loading kineto traces: both layouts agree, gz, xz and plain, bad files get one clear error."""

from __future__ import annotations

import gzip
import json
import lzma
from pathlib import Path

import numpy as np
import pytest

from membound.errors import BadInput
from membound.trace import jsonstream
from membound.trace import kineto as load_mod
from membound.trace.load import load_trace
from membound.trace.model import KERNEL, MEMCPY
from support import tracebuilder
from support.paths import FIXTURES as DATA


def _tables(t):
    return {
        k: {c: v.tolist() for c, v in getattr(t, k).cols.items()} for k in ("cpu", "runtime", "gpu")
    }


def _resolved(t):
    """Tables with interned ids replaced by what they stand for (ids may differ)."""
    out = _tables(t)
    for k in out:
        out[k]["name"] = [t.names[i] for i in out[k]["name"]]
    out["cpu"]["shape"] = [t.shapes[i] if i >= 0 else None for i in out["cpu"]["shape"]]
    return out


def test_kineto_layout_and_compact_layout_load_the_same(tmp_path):
    b = tracebuilder.planted_input_pipeline()
    a = load_trace(b.write(tmp_path / "a.json.gz"))
    c = load_trace(b.write(tmp_path / "c.json", layout="compact"))
    assert _tables(a) == _tables(c)
    assert a.names == c.names
    assert a.device_name == "NVIDIA H200"
    assert len(a.gpu) == 6 and len(a.runtime) == 8
    kinds = a.gpu.kind.tolist()
    assert kinds.count(KERNEL) == 4 and kinds.count(MEMCPY) == 2
    copy = np.flatnonzero(a.gpu.kind == MEMCPY)[0]
    assert a.gpu.bytes[copy] == 1_000_000
    assert a.names[a.gpu.name[copy]] == "Memcpy HtoD (Pageable -> Device)"


def test_streaming_path_survives_small_chunks(tmp_path, monkeypatch):
    """Chunk boundaries anywhere inside events must not change the result."""
    b = tracebuilder.planted_launch_bound(steps=2, kernels=50)
    path = b.write(tmp_path / "t.json")
    whole = load_trace(path)
    monkeypatch.setattr(jsonstream, "CHUNK", 997)
    chunked = load_trace(path)
    assert _tables(whole) == _tables(chunked)
    assert len(chunked.gpu) == 100


def test_real_cpu_trace_reads_shapes_and_steps():
    t = load_trace(DATA / "cpu_only" / "trace.json.gz")
    assert not t.has_gpu
    names = [t.names[i] for i in t.cpu.name]
    assert sum(n.startswith("ProfilerStep#") for n in names) == 3
    addmm = [i for i, n in enumerate(names) if n == "aten::addmm"]
    assert addmm
    dims, types, concrete = t.shapes[t.cpu.shape[addmm[0]]]
    assert dims[1] == [32, 64] and types[0] == "float"


def test_same_document_via_json_fallback(tmp_path, monkeypatch):
    """Without orjson the loader falls back to json and reads the same tables."""
    b = tracebuilder.planted_input_pipeline()
    path = b.write(tmp_path / "t.json.gz")
    fast = load_trace(path)
    monkeypatch.setattr(load_mod, "_loads", lambda data: json.loads(data))
    slow = load_trace(path)
    assert _tables(fast) == _tables(slow)


def test_bare_event_array(tmp_path):
    b = tracebuilder.planted_input_pipeline()
    p = tmp_path / "bare.json"
    p.write_text(json.dumps(b.document()["traceEvents"]))
    assert len(load_trace(p).gpu) == 6


def test_empty_trace_is_bad_input(tmp_path):
    p = tmp_path / "empty.json"
    p.write_text('{"schemaVersion": 1, "traceEvents": []}')
    with pytest.raises(BadInput, match="holds no event membound can use"):
        load_trace(p)


@pytest.mark.parametrize("cut", [10, 200, 1500, -40])
def test_truncated_files_raise_bad_input(tmp_path, cut):
    text = tracebuilder.planted_input_pipeline().text().encode()
    p = tmp_path / "cut.json"
    p.write_bytes(text[:cut])
    with pytest.raises(BadInput, match="truncated or not a kineto trace"):
        load_trace(p)


def test_truncated_gzip_raises_bad_input(tmp_path):
    data = gzip.compress(tracebuilder.planted_input_pipeline().text().encode())
    p = tmp_path / "cut.json.gz"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(BadInput, match="truncated or not a kineto trace"):
        load_trace(p)


@pytest.mark.parametrize("content", [b"hello, not json", b"\x00\x01\x02binary", b'{"a": 1}', b""])
def test_non_trace_files_raise_bad_input(tmp_path, content):
    p = tmp_path / "x.json"
    p.write_bytes(content)
    with pytest.raises(BadInput):
        load_trace(p)


def test_missing_file(tmp_path):
    with pytest.raises(BadInput, match="does not exist"):
        load_trace(tmp_path / "nope.json")


def test_worker_processes_give_the_same_tables(tmp_path, monkeypatch):
    """Big files are parsed by 2 worker processes; the merged tables must match."""
    b = tracebuilder.planted_launch_bound(steps=3, kernels=40)
    b.op("aten::add", 5, 1, [[4, 4], [4, 4], []], ["float", "float", "Scalar"], ["", "", "1"])
    path = b.write(tmp_path / "t.json")
    inline = load_trace(path)
    monkeypatch.setattr(load_mod, "_PARALLEL_MIN", 1)
    monkeypatch.setattr(jsonstream, "CHUNK", 4096)
    monkeypatch.setattr(load_mod.os, "cpu_count", lambda: 2)
    parallel = load_trace(path)
    assert _resolved(inline) == _resolved(parallel)
    assert [inline.names[i] for i in inline.cpu.name] == [
        parallel.names[i] for i in parallel.cpu.name
    ]
    add = [i for i, n in enumerate(parallel.cpu.name) if parallel.names[n] == "aten::add"][0]
    assert parallel.shapes[parallel.cpu.shape[add]][0] == [[4, 4], [4, 4], []]


def test_xz_loads_as_its_plain_text(tmp_path):
    """An xz-compressed trace (membound's fixtures: a third smaller than gzip) is judged by
    its first bytes, whatever its name, and loads to the same tables."""
    text = tracebuilder.planted_input_pipeline().text().encode()
    plain = tmp_path / "t.json"
    plain.write_bytes(text)
    for name in ("t.json.xz", "t.xz.json.gz"):
        packed = tmp_path / name
        packed.write_bytes(lzma.compress(text))
        assert _tables(load_trace(packed)) == _tables(load_trace(plain))


def test_truncated_xz_raises_bad_input(tmp_path):
    data = lzma.compress(tracebuilder.planted_input_pipeline().text().encode())
    p = tmp_path / "cut.json.xz"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(BadInput, match="truncated or not a kineto trace|cannot read it"):
        load_trace(p)


def test_an_xz_that_expands_past_its_ratio_is_refused(tmp_path, monkeypatch):
    """The expansion limit (a compression bomb) holds for xz as for gzip."""
    text = tracebuilder.planted_launch_bound(steps=2, kernels=200).text().encode()
    p = tmp_path / "t.json.xz"
    p.write_bytes(lzma.compress(text))
    monkeypatch.setattr(jsonstream, "GZIP_RATIO_FLOOR", 0)
    monkeypatch.setattr(jsonstream, "CHUNK", 4096)
    monkeypatch.setenv(jsonstream.MAX_GZIP_RATIO_VAR, "2")
    with pytest.raises(BadInput, match="compression bomb"):
        load_trace(p)


@pytest.mark.parametrize("name", ["t.json", "t.json.gz", "t.json.xz"])
def test_progress_reports_bytes_of_the_file_up_to_its_size(tmp_path, monkeypatch, name):
    # `membound analyze` draws its progress bar for big traces from these calls
    b = tracebuilder.planted_launch_bound(steps=2, kernels=200)
    if name.endswith(".xz"):
        path = tmp_path / name
        path.write_bytes(lzma.compress(b.text().encode()))
    else:
        path = Path(b.write(tmp_path / name))
    monkeypatch.setattr(jsonstream, "CHUNK", 4096)
    seen = []
    trace = load_trace(path, progress=lambda done, total: seen.append((done, total)))
    size = path.stat().st_size
    assert len(trace.gpu) == 400
    assert len(seen) > 2  # several chunks, several reports
    assert all(total == size for _, total in seen)
    dones = [d for d, _ in seen]
    assert dones == sorted(dones) and dones[-1] == size and dones[0] > 0
    if name.endswith(".json"):  # gzip and xz read their compressed input in blocks
        assert dones[0] < size


def test_a_small_gzip_that_expands_starts_workers_midway(tmp_path, monkeypatch):
    """A gzip's size on disk says little (a 12 MB file may hold 1.5 GB): the workers start
    once the parsed bytes pass the threshold, and the tables are the same."""
    b = tracebuilder.planted_launch_bound(steps=3, kernels=40)
    path = b.write(tmp_path / "t.json.gz", layout="compact")
    inline = load_trace(path)
    started = []
    real = load_mod._Sink._start
    monkeypatch.setattr(
        load_mod._Sink, "_start", lambda self: started.append(self.seen) or real(self)
    )
    monkeypatch.setattr(load_mod, "_PARALLEL_MIN", 20_000)
    monkeypatch.setattr(jsonstream, "CHUNK", 4096)
    monkeypatch.setattr(load_mod.os, "cpu_count", lambda: 2)
    parallel = load_trace(path)
    assert len(started) == 1 and started[0] > 20_000
    assert _resolved(inline) == _resolved(parallel)
