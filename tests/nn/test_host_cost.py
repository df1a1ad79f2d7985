"""`membound.nn.host_cost`: what a norm call costs the host and the GPU, ATen's and membound's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_the_cli_fails_cleanly_without_cuda():
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": SRC}
    done = subprocess.run(
        [sys.executable, "-m", "membound.nn.host_cost", "--rows", "64", "--hidden", "32"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "no CUDA device" in lines[0]
    assert "Traceback" not in done.stderr and not done.stdout.strip()


def test_bad_arguments_are_refused_before_any_gpu_work():
    from membound.errors import BadInput
    from membound.nn.host_cost import measure

    with pytest.raises(BadInput, match="kind"):
        measure(8, 8, kind="group")
    with pytest.raises(BadInput, match="positive"):
        measure(0, 8)


@pytest.mark.gpu
def test_measures_every_variant_on_a_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    done = subprocess.run(
        [sys.executable, "-m", "membound.nn.host_cost", "--rows", "12288", "--hidden", "768",
         "--kind", "layer", "--dtype", "float32", "--autocast"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": SRC}, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    for v in ("aten", "aten_add", "membound", "membound_add"):
        assert out[v]["host_us"] > 0 and out[v]["gpu_us"] > 0
    # membound's kernels move fewer bytes: less GPU time than ATen's at GPT-2's shape
    assert out["membound"]["gpu_us"] < out["aten"]["gpu_us"]
    # the residual add costs ATen a kernel each way that membound fuses
    assert out["aten_add"]["gpu_us"] > out["aten"]["gpu_us"]


def test_the_probe_takes_variants_that_leave_an_input_unused(monkeypatch):
    """The norm-alone variants never touch the residual `r`: returning gradients for it must
    not fail (the H200 run of 2026-12-03 did, so the what-if had no host cost). On CPU with
    the CUDA syncs stubbed out: the autograd path is the same."""
    import warnings

    import torch

    from membound.nn import host_cost

    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)

    class NoKernels:  # a CPU-only build cannot trace CUDA activity
        def __init__(self, **_):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def events(self):
            return []

    monkeypatch.setattr(torch.profiler, "profile", NoKernels)
    monkeypatch.setattr(host_cost, "WARMUP", 1)
    monkeypatch.setattr(host_cost, "BURSTS", 1)
    monkeypatch.setattr(host_cost, "BURST", 2)
    monkeypatch.setattr(host_cost, "PROFILED", 1)
    norm = torch.nn.LayerNorm(16)
    x = torch.randn(4, 16, requires_grad=True)
    r = torch.randn(4, 16, requires_grad=True)
    g = torch.randn(4, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # autocast("cuda") on a CPU-only build
        alone = host_cost._probe(torch, norm, lambda: (norm(x),), (x, r), g, False)
        added = host_cost._probe(torch, norm, lambda: (norm(x + r), x + r), (x, r), g, False)
    assert alone["host_us"] > 0 and added["host_us"] > 0
    # the probe returns gradients, never accumulates them
    assert x.grad is None and r.grad is None and norm.weight.grad is None
