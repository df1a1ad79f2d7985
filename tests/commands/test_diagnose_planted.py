"""Every planted-bottleneck script runs under `membound diagnose` (tiny CPU sizes here).

On the H200 (`benchmarks/gpu/diagnose.sh`) each must report its own finding code on top; here
we check the scripts run unmodified, their steps are found, and the trace is written.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from membound.cli import main

PLANTED = Path(__file__).resolve().parents[2] / "examples" / "planted"
CODES = (
    "pageable-copy blocking-copy input-starved host-sync launch-bound memory-bound-op "
    "unfused-chain fp32-storage fp32-matmul"
).split()


def test_one_planted_script_per_finding_code():
    scripts = {p.stem for p in PLANTED.glob("*.py")}
    assert {c.replace("-", "_") for c in CODES} | {"healthy"} <= scripts


@pytest.mark.parametrize("stem", sorted(p.stem for p in PLANTED.glob("[!_]*.py")))
def test_planted_script_runs_under_diagnose(tmp_path, stem):
    out = tmp_path / "out"
    code = main(
        ["diagnose", "--wait", "1", "--warmup", "1", "--steps", "2", "--stop-after-capture",
         "--no-analyze", "--out", str(out), "--", str(PLANTED / f"{stem}.py"), "--device", "cpu"]
    )  # fmt: skip
    assert code == 0
    meta = json.loads((out / "capture.json").read_text())
    # a CUDA-graphed step runs its optimizer inside the graph: that script marks its steps
    explicit = "membound.step" in (PLANTED / f"{stem}.py").read_text()
    assert meta["step_source"] == ("explicit" if explicit else "optimizer") and meta["complete"]
    with gzip.open(out / "trace.json.gz", "rt") as f:
        names = {e.get("name", "") for e in json.load(f)["traceEvents"]}
    assert {"ProfilerStep#2", "ProfilerStep#3"} <= names
