"""`membound roofline`: help, JSON schema, chart files, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from membound.cli import main

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-m", "membound", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_help():
    r = _cli("roofline", "--help")
    assert r.returncode == 0
    for flag in ("--device", "--json", "--plot", "--refresh", "--quick"):
        assert flag in r.stdout


def test_cpu_json_has_the_schema_keys(tmp_path, capsys):
    out = tmp_path / "ceilings.json"
    plot = tmp_path / "roof.svg"
    assert (
        main(["roofline", "--device", "cpu", "--quick", "--json", str(out), "--plot", str(plot)])
        == 0
    )
    data = json.loads(out.read_text())
    assert data["schema"] == 1
    dev = data["device"]
    assert dev["name"] and dev["kind"] == "cpu" and dev["ceilings_source"] == "measured"
    ceil = dev["ceilings"]
    for key in (
        "device",
        "name",
        "memory_bandwidth",
        "read_bandwidth",
        "flops",
        "transfers",
        "source",
        "key",
        "measured_at",
        "seconds",
    ):
        assert key in ceil, key
    assert ceil["device"] == "cpu" and ceil["memory_bandwidth"] > 0 and ceil["name"] == dev["name"]
    assert set(ceil["flops"]) == {"fp32", "bf16"}
    from membound.device.ceilings import Ceilings

    assert Ceilings.from_dict(ceil).ridge("fp32") > 0  # loads back
    assert plot.read_text().rstrip().endswith("</svg>")
    assert "memory bandwidth" in capsys.readouterr().out


def test_second_run_uses_cache(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["roofline", "--device", "cpu", "--quick", "--json", str(a)]) == 0
    assert main(["roofline", "--device", "cpu", "--quick", "--json", str(b)]) == 0
    assert json.loads(a.read_text()) == json.loads(b.read_text())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--plot", "x.pdf"], ".png or .svg"),
        (["--json", "/nonexistent-dir/x.json"], "does not exist"),
    ],
)
def test_bad_arguments_give_one_line(args, message):
    r = _cli("roofline", "--device", "cpu", "--quick", *args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in r.stderr


def test_unknown_device_choice_is_usage_error():
    r = _cli("roofline", "--device", "tpu")
    assert r.returncode == 2 and "invalid choice" in r.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error")
def test_cuda_without_gpu_is_one_line():
    r = _cli("roofline", "--device", "cuda")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "no CUDA device" in lines[0]
