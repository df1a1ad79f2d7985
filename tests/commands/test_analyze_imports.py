"""The trace-analysis path imports neither torch nor triton: `membound analyze` of a trace from
a cluster runs on a laptop in well under a second (issue 18)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from membound.trace.capture_meta import timeline_in
from support.paths import FIXTURES, ROOT

PROBE = """
import json, sys, time
t0 = time.perf_counter()
from membound.cli import main
code = main(["analyze", sys.argv[1], "--quiet", "--json", sys.argv[2]])
print(json.dumps({"code": code, "s": time.perf_counter() - t0,
                  "torch": "torch" in sys.modules, "triton": "triton" in sys.modules}))
"""


def test_membound_analyze_imports_no_torch(tmp_path):
    trace = timeline_in(FIXTURES / "h200_pageable_copy")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(trace), str(tmp_path / "r.json")],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["code"] == 0 and (tmp_path / "r.json").exists()
    assert not got["torch"] and not got["triton"]
    # the analysis itself, interpreter start excluded: well under a second on this 2-core box
    assert got["s"] < 3.0, got
    assert time.perf_counter() - t0 < 60
