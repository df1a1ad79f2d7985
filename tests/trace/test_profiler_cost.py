"""`trace.profiler_cost`: the timeline profiler's host cost per CUDA call, measured after
diagnose's script and kept in the capture meta; the replay takes it off where the GPU hid it."""

from __future__ import annotations

import json
import subprocess
from types import SimpleNamespace

import pytest

from membound.trace.profiler_cost import META_KEY, measure, of, probe


def _meta(tmp_path, doc=None):
    path = tmp_path / "capture.json"
    path.write_text(json.dumps(doc or {"trace": "trace.json.gz"}))
    return path


def test_keeps_the_measurement_in_the_meta(tmp_path):
    path = _meta(tmp_path)
    line = {"us_per_call": 4.2, "plain_us": 5.1, "profiled_us": 9.3, "calls": 2000, "rounds": 5}
    seen = []

    def run(cmd, **kw):
        seen.append(cmd)
        return SimpleNamespace(returncode=0, stdout="warming up\n" + json.dumps(line), stderr="")

    said = probe(path, run=run)
    assert seen[0][-2:] == ["-m", "membound.trace.profiler_cost"]
    assert "4.2 us per CUDA call" in said
    meta = json.loads(path.read_text())
    assert meta[META_KEY] == line and of(meta) == 4.2


@pytest.mark.parametrize(
    "outcome,why",
    [
        (subprocess.TimeoutExpired("x", 60), "took longer than 60 s"),
        (SimpleNamespace(returncode=1, stdout="", stderr="boom\nRuntimeError: no CUDA"), "no CUDA"),
        (SimpleNamespace(returncode=0, stdout="not json", stderr=""), "no JSON"),
    ],
)
def test_a_failed_probe_is_a_note_not_an_error(tmp_path, outcome, why):
    path = _meta(tmp_path)

    def run(cmd, **kw):
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    said = probe(path, run=run)
    assert said.startswith("profiler cost not measured") and why in said
    meta = json.loads(path.read_text())
    assert "error" in meta[META_KEY] and of(meta) is None and said in meta["notes"]


def test_of_reads_only_a_measurement():
    assert of(None) is None and of({}) is None
    assert of({META_KEY: {"error": "x"}}) is None
    assert of({META_KEY: {"us_per_call": "nan?"}}) is None
    assert of({META_KEY: {"us_per_call": 0.0}}) == 0.0


def test_measure_needs_cuda():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA machine measures for real (GPU test below)")
    with pytest.raises(RuntimeError, match="no CUDA"):
        measure()


@pytest.mark.gpu
def test_measure_on_a_gpu():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    r = measure(calls=500, rounds=3)
    assert r["profiled_us"] >= r["plain_us"] * 0.9 and r["us_per_call"] >= 0


def test_measures_as_the_capture_recorded(tmp_path):
    """A capture that recorded only the calls the timeline reads (`--api-records launches`)
    has its per-call cost measured with the same records."""
    line = {"us_per_call": 0.4, "plain_us": 5.1, "profiled_us": 5.5, "calls": 2000, "rounds": 5}
    seen = []

    def run(cmd, **kw):
        seen.append(cmd)
        return SimpleNamespace(returncode=0, stdout=json.dumps(line), stderr="")

    launches = {"mode": "launches", "applied": True}
    probe(_meta(tmp_path, {"trace": "t", "api_records": launches}), run=run)
    probe(_meta(tmp_path, {"trace": "t", "api_records": {"mode": "all"}}), run=run)
    probe(_meta(tmp_path, {"trace": "t", "api_records": None}), run=run)
    # the filter failed: every call was recorded, so the probe records every call too
    failed = {"mode": "launches", "applied": False, "why": "no libcupti"}
    probe(_meta(tmp_path, {"trace": "t", "api_records": failed}), run=run)
    assert seen[0][-1] == "launches"
    assert [c[-1] for c in seen[1:]] == ["membound.trace.profiler_cost"] * 3


def test_autocasts_added_host_work_in_launches_per_kernel():
    """(autocast's step - the plain step) over (the plain step's kernels x a plain launch):
    2.0 ms more over 400 kernels of 5 us each is one launch a kernel; never below 0."""
    from membound.trace.profiler_cost import launches_per_kernel

    assert launches_per_kernel(4.0, 6.0, 400, 5.0) == pytest.approx(1.0)
    assert launches_per_kernel(4.0, 4.5, 400, 5.0) == pytest.approx(0.25)
    assert launches_per_kernel(4.0, 3.5, 400, 5.0) == 0.0
    assert launches_per_kernel(4.0, 6.0, 0, 5.0) is None
    assert launches_per_kernel(4.0, 6.0, 400, 0.0) is None


def test_reads_the_autocast_factor_and_says_it(tmp_path):
    from membound.trace.profiler_cost import autocast_factor

    line = {"us_per_call": 0.4, "plain_us": 5.1, "profiled_us": 5.5,
            "autocast_launches_per_kernel": 0.62}  # fmt: skip
    said = probe(
        _meta(tmp_path),
        run=lambda cmd, **kw: SimpleNamespace(returncode=0, stdout=json.dumps(line), stderr=""),
    )
    assert "autocast added 0.62 launches' host time a kernel" in said
    assert autocast_factor(json.loads((tmp_path / "capture.json").read_text())) == 0.62
    assert autocast_factor({META_KEY: {"us_per_call": 0.4}}) is None
    assert autocast_factor({META_KEY: {"autocast_launches_per_kernel": -1}}) is None


@pytest.mark.gpu
def test_autocast_cost_on_a_gpu():
    """On a GPU the block launches kernels, and autocast's step costs the host more."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    from membound.trace.profiler_cost import autocast_cost

    r = autocast_cost(5.0, rounds=2, steps=10)
    assert r["autocast_kernels"] > 50
    assert r["autocast_ms"] > r["autocast_plain_ms"] > 0
    assert r["autocast_launches_per_kernel"] > 0
