"""Is a script slower under `membound diagnose` before its capture starts, and why?

On the H200 (2026-12-03) the HF Trainer Llama's steps before the capture took 57.1 ms by
membound's step timer, against 45.4 ms by the script's own plain timer run alone: membound's
"unprofiled" step, the one every ms/step refers to, was 26% too long. This runs the script
(its own timer, `MEMBOUND_TRUTH` line) four ways in one process each, same flags:

1. alone;
2. under `torch.profiler.profile` (GPU activity only) started on a schedule that never leaves
   its wait phase: the profiler object's cost while it waits;
3. under membound's capture hooks with a capture that never starts (`membound diagnose
   --wait` beyond the script's steps): the step hooks, the clock, the waiting profiler;
4. alone again (drift).

    PYTHONPATH=src python benchmarks/probe_wait_overhead.py examples/real/hf_trainer_llama.py --steps 30
Prints one JSON line per variant: its step_ms, step_ms_median and the plain timer's spread.
(In the 2026-12-03 call the waiting-profiler variant failed to import the script's own
`_common` module; the script's folder is now put on sys.path as Python does for a script.)
"""

from __future__ import annotations

import json
import subprocess
import sys

PREFIX = "MEMBOUND_TRUTH "

WRAP = """
import os, runpy, sys, torch
from torch.profiler import ProfilerActivity, profile, schedule
p = profile(activities=[ProfilerActivity.CUDA], schedule=schedule(wait=100000, warmup=1, active=1))
p.start()
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def truth(cmd: list[str]) -> dict | None:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    for line in (out.stdout + out.stderr).splitlines():
        if line.startswith(PREFIX):
            return json.loads(line[len(PREFIX) :])
    sys.stderr.write((out.stdout + out.stderr)[-2000:])
    return None


def main() -> int:
    script, *args = sys.argv[1:]
    py = sys.executable
    variants = {
        "alone": [py, script, *args],
        "waiting_profiler": [py, "-c", WRAP, script, *args],
        "membound_hooks": [
            py,
            "-m",
            "membound",
            "diagnose",
            "--wait",
            "100000",
            "--steps",
            "2",
            "--no-annotate",
            "--out",
            "/tmp/probe_wait",
            "--",
            py,
            script,
            *args,
        ],  # fmt: skip
        "alone_again": [py, script, *args],
    }
    for name, cmd in variants.items():
        t = truth(cmd)
        row = {"variant": name}
        if t:
            row.update(
                {
                    k: t.get(k)
                    for k in ("step_ms", "step_ms_median", "step_ms_min", "step_ms_max", "steps")
                }
            )
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
