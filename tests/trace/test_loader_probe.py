"""`trace.loader_probe`: what a worker-made batch costs the training thread, pageable against
pinned, measured after diagnose's script; `pageable-copy` adds the GPU idle beside the copies
that pinning moves off the thread, at most that cost."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from membound.trace.capture_meta import timeline_in
from membound.trace.load import load_trace
from membound.trace.loader_probe import META_KEY, batch_bytes, main, measure, probe
from membound.trace.loader_probe import release_moved_ms as moved_of

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LIGHTNING = FIXTURES / "h200_real_lightning_fit_run5"

#: one line of the probe, as the H200 printed its kind (loader_host_2026-12-04f.jsonl)
LINE = {
    "bytes": 38535680,
    "workers": 2,
    "pageable": {"next_ms": 1.17, "copy_ms": 7.18, "release_ms": 6.05},
    "pinned": {"next_ms": 0.14, "copy_ms": 0.19, "release_ms": 0.01},
    "release_moved_ms": 6.04,
    "next_moved_ms": 1.03,
}


def _capture(tmp_path, fixture=LIGHTNING):
    """A capture folder holding the fixture's timeline trace and a meta naming it."""
    shutil.copy(timeline_in(fixture), tmp_path / timeline_in(fixture).name)
    path = tmp_path / "capture.json"
    path.write_text(json.dumps({"trace": timeline_in(fixture).name}))
    return path


def test_the_batch_of_a_worker_fed_loader_copied_from_pageable_memory():
    """Lightning's batch: 64 x 3 x 224 x 224 fp32 images and 64 int64 labels a __next__."""
    assert batch_bytes(load_trace(timeline_in(LIGHTNING))) == 64 * 3 * 224 * 224 * 4 + 512


@pytest.mark.parametrize(
    "fixture",
    ["h200_real_resnet50_fp32", "h200_real_tabular_mlp_oos1"],
)
def test_no_batch_without_workers_or_without_pageable_copies(fixture):
    """ResNet-50 fp32 pins its batches; the tabular loop has no workers."""
    assert batch_bytes(load_trace(timeline_in(FIXTURES / fixture))) is None


def test_keeps_the_measurement_in_the_meta(tmp_path):
    path = _capture(tmp_path)
    seen = []

    def run(cmd, **kw):
        seen.append(cmd)
        return SimpleNamespace(returncode=0, stdout=json.dumps(LINE), stderr="")

    said = probe(path, run=run)
    assert seen[0][1:4] == ["-m", "membound.trace.loader_probe", "--bytes"]
    assert seen[0][4] == str(64 * 3 * 224 * 224 * 4 + 512)
    assert "38.5 MB" in said and "6.05 ms pageable" in said and "6.04 ms moved" in said
    meta = json.loads(path.read_text())
    assert meta[META_KEY] == LINE and moved_of(meta) == 6.04


def test_nothing_to_measure_is_said_and_runs_nothing(tmp_path):
    path = _capture(tmp_path, FIXTURES / "h200_real_resnet50_fp32")

    def run(cmd, **kw):
        raise AssertionError("must not run")

    assert "not measured" in probe(path, run=run)
    assert META_KEY not in json.loads(path.read_text())


@pytest.mark.parametrize(
    "outcome,why",
    [
        (subprocess.TimeoutExpired("x", 90), "took longer than 90 s"),
        (
            SimpleNamespace(returncode=1, stdout="", stderr="RuntimeError: no CUDA device"),
            "no CUDA",
        ),
        (SimpleNamespace(returncode=0, stdout="[1, 2]", stderr=""), "no JSON object"),
        (SimpleNamespace(returncode=0, stdout='{"bytes": 3}', stderr=""), "no release_moved_ms"),
    ],
)
def test_a_failed_probe_is_a_note_not_an_error(tmp_path, outcome, why):
    path = _capture(tmp_path)

    def run(cmd, **kw):
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    said = probe(path, run=run)
    assert said.startswith("worker batch cost not measured") and why in said
    meta = json.loads(path.read_text())
    assert "error" in meta[META_KEY] and moved_of(meta) is None and said in meta["notes"]


def test_moved_reads_only_a_measurement():
    assert moved_of(None) is None and moved_of({}) is None
    assert moved_of({META_KEY: {"error": "x"}}) is None
    assert moved_of({META_KEY: {"release_moved_ms": "?"}}) is None
    assert moved_of({META_KEY: {"release_moved_ms": -1.0}}) is None
    assert moved_of({META_KEY: {"release_moved_ms": 0.0}}) == 0.0


def test_bad_arguments_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--bytes", "0"])
    assert e.value.code == 2 and "must be >= 1" in capsys.readouterr().err


def test_measure_needs_cuda():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA machine measures for real (GPU test below)")
    with pytest.raises(RuntimeError, match="no CUDA"):
        measure(1 << 20)


@pytest.mark.gpu
def test_measure_on_a_gpu():
    """A pinned batch costs the training thread less to drop than a shared-memory one."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    got = measure(16 << 20, batches=5)
    assert got["bytes"] == 16 << 20
    assert got["pinned"]["release_ms"] < got["pageable"]["release_ms"]
    assert got["release_moved_ms"] > 0
