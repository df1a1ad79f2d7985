"""`membound analyze FOLDER` of rank traces, and `membound diagnose --nproc-per-node` on CPU
(a real 2-process gloo run of examples/distributed/straggler.py under torchrun)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from membound.cli import main
from support import multirank

ROOT = Path(__file__).resolve().parents[2]
STRAGGLER = ROOT / "examples" / "distributed" / "straggler.py"
EXPOSED = ROOT / "examples" / "distributed" / "exposed_allreduce.py"


def test_analyze_folder_of_rank_traces(tmp_path, capsys):
    multirank.write_ranks(tmp_path / "run", multirank.straggler)
    out = tmp_path / "r.json"
    html = tmp_path / "r.html"
    assert main(["analyze", str(tmp_path / "run"), "--json", str(out), "--html", str(html)]) == 0
    assert html.stat().st_size > 1000 and "straggler-rank" in html.read_text()
    text = capsys.readouterr().out
    assert "straggler: rank 1 holds the others back 3.00 ms/step" in text
    d = json.loads(out.read_text())
    assert d["schema"] == 1 and d["findings"][0]["code"] == "straggler-rank"
    ranks = d["ranks"]
    assert ranks["world_size"] == 2 and ranks["matched_steps"] == 3
    assert [r["rank"] for r in ranks["per_rank"]] == [0, 1]
    assert ranks["per_rank"][0]["wait_ms_per_step"] == pytest.approx(3.0)
    assert ranks["stragglers"][0]["rank"] == 1
    assert ranks["stragglers"][0]["held_back_ms_per_step"] == pytest.approx(3.0)
    assert ranks["collectives"][0]["bus_bandwidth_gbs"] == pytest.approx(250.0)
    assert d["steps"]["count"] == 6  # both ranks' steps pooled


def test_analyze_single_rank_trace_is_not_merged(tmp_path, capsys):
    (path,) = multirank.write_ranks(tmp_path, multirank.exposed, world=1)
    assert main(["analyze", str(path), "--quiet", "--json", str(tmp_path / "r.json")]) == 0
    d = json.loads((tmp_path / "r.json").read_text())
    assert "ranks" not in d and d["findings"][0]["code"] == "exposed-communication"


def test_nproc_per_node_must_be_positive(tmp_path, capsys):
    script = tmp_path / "t.py"
    script.write_text("pass\n")
    assert main(["diagnose", "--nproc-per-node", "0", "--", str(script)]) == 2
    assert "--nproc-per-node 0" in capsys.readouterr().err


def test_forward_args_keep_options_and_drop_nproc(tmp_path):
    import argparse

    from membound.commands import diagnose

    p = argparse.ArgumentParser()
    diagnose.add_arguments(p)
    a = p.parse_args(
        [
            "--nproc-per-node",
            "2",
            "--steps",
            "3",
            "--out",
            "o",
            "--json",
            "r.json",
            "--",
            "t.py",
            "-x",
        ]
    )
    fwd = diagnose._forward_args(a)
    assert "--nproc-per-node" not in fwd and fwd[0] == "diagnose"
    assert fwd[fwd.index("--steps") + 1] == "3"
    assert fwd[fwd.index("--json") + 1] == str(Path("r.json").absolute())
    assert fwd[-3:] == ["--", "t.py", "-x"]
    assert "--api-records" not in fwd  # the default is not spelled out
    assert "--cupti-buffers" not in fwd
    a = p.parse_args(
        ["--nproc-per-node", "2", "--api-records", "all", "--cupti-buffers", "per-thread",
         "--", "t.py"]
    )  # fmt: skip
    fwd = diagnose._forward_args(a)
    assert fwd[fwd.index("--api-records") + 1] == "all"
    assert fwd[fwd.index("--cupti-buffers") + 1] == "per-thread"


def _gloo_ok() -> bool:
    try:
        import torch.distributed as dist

        return dist.is_available() and dist.is_gloo_available()
    except ImportError:
        return False


@pytest.mark.skipif(not _gloo_ok(), reason="torch.distributed with gloo is not available")
def test_diagnose_nproc_per_node_gloo_straggler(tmp_path):
    """Two CPU ranks under torchrun; rank 1 sleeps 30 ms per step. On CPU there are no GPU
    kernels: the gloo all-reduce spans give each rank's waiting, and rank 1 is named."""
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable, "-m", "membound", "diagnose", "--nproc-per-node", "2",
        "--wait", "1", "--warmup", "1", "--steps", "3", "--out", str(out),
        "--json", str(tmp_path / "r.json"), "--",
        str(STRAGGLER), "--steps", "8", "--width", "64", "--batch", "8", "--sleep-ms", "30",
    ]  # fmt: skip
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    # a fresh clone's CI run saw rank 0 die of a SIGABRT once (2026-12-06), its cause cut from
    # the stderr's tail by rank 1's traceback: every line rank 0 wrote is kept first
    rank0 = [line for line in p.stderr.splitlines() if "[rank0]" in line or "abort" in line.lower()]
    assert p.returncode == 0, "\n".join(rank0[-60:]) + "\n...\n" + p.stderr[-3000:]
    assert (out / "trace.rank0.json.gz").exists() and (out / "trace.rank1.json.gz").exists()
    meta = json.loads((out / "capture.rank1.json").read_text())
    assert meta["rank"] == 1 and meta["steps_captured"] == 3
    d = json.loads((tmp_path / "r.json").read_text())
    ranks = d["ranks"]
    assert ranks["backend"] == "gloo" and ranks["world_size"] == 2
    r0, r1 = ranks["per_rank"]
    assert r0["steps"] == r1["steps"] == 3
    assert r0["median_step_ms"] > 25 and r1["median_step_ms"] > 25  # both run at the sleeper's pace
    assert r0["wait_ms_per_step"] > 20 > r1["wait_ms_per_step"]
    (s,) = ranks["stragglers"]
    assert s["rank"] == 1 and 20 < s["held_back_ms_per_step"] < 60
    assert s["method"] == "collective waits"
    # merging the folder again afterwards gives the same verdict
    assert main(["analyze", str(out), "--quiet", "--json", str(tmp_path / "again.json")]) == 0
    again = json.loads((tmp_path / "again.json").read_text())["ranks"]["stragglers"]
    assert again[0]["rank"] == 1


@pytest.mark.skipif(not _gloo_ok(), reason="torch.distributed with gloo is not available")
def test_exposed_allreduce_example_runs_on_cpu(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
        str(EXPOSED), "--steps", "3", "--width", "64", "--layers", "2", "--batch", "2",
    ]  # fmt: skip
    for _ in range(3):
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
        if p.returncode == 0 or "terminate called without an active exception" not in p.stderr:
            break
        # gloo on CPU now and then aborts a rank while tearing its threads down, after the
        # run (about 1 in 4 here, torch 2.13 CPU; a clean clone's CI run on 2026-12-07 met it
        # twice in a row): retries tell that apart from a failure
    assert p.returncode == 0, p.stderr[-3000:]
