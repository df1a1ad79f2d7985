"""Does the profiler's host cost outlast membound's capture because kineto leaves CUPTI on?

kineto calls `cuptiFinalize` when a trace stops only where `TEARDOWN_CUPTI=1` (its
`cuptiTearDown_`); otherwise CUPTI stays subscribed for the rest of the process. On the H100
(2026-12-07) the steps after membound's capture ran well above those before it on the
launch-heavy loops: the DDPM U-Net 94.3 against 70.9 ms, the LSTM LM 6.34 against 4.54
(`tests/fixtures/h100_real_{ddpm_unet_truth7,lstm_lm_truth3}`). This probe runs `membound
diagnose --no-analyze` on real scripts, alternating `TEARDOWN_CUPTI` unset and "1", each run
its own process, and prints per run the medians of the steps before the capture, while
profiled and after it (host clock), and the launching threads' CPU per phase; then per
script and setting the after/before ratios. One JSON line per run, a table at the end.

    python benchmarks/probe_cupti_teardown.py [--scripts lstm_lm,ddpm_unet] [--rounds 2]
        [--after 30] [--budget-s 150]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from membound.defaults import CAPTURE_OP_STEPS  # noqa: E402
from membound.trace.sync_mode import SLEPT_STEPS  # noqa: E402

SETTINGS = ("unset", "1")


def run_once(script: str, setting: str, args) -> dict:
    """One `membound diagnose` of `script` with `TEARDOWN_CUPTI` as `setting`: the phases'
    medians from its capture.json."""
    env = dict(os.environ)
    env.pop("TEARDOWN_CUPTI", None)
    if setting != "unset":
        env["TEARDOWN_CUPTI"] = setting
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        total = (
            args.wait + SLEPT_STEPS + args.warmup + args.steps + 1 + CAPTURE_OP_STEPS
            + args.after + 2
        )  # fmt: skip
        cmd = [
            sys.executable, "-m", "membound", "diagnose", "--no-analyze",
            "--wait", str(args.wait), "--warmup", str(args.warmup), "--steps", str(args.steps),
            "--out", str(out), "--", sys.executable, str(ROOT / "examples" / "real" / f"{script}.py"),
            "--steps", str(total), "--warmup-steps", "0",
        ]  # fmt: skip
        t = time.time()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
        got: dict = {"script": script, "teardown": setting, "rc": proc.returncode}
        got["wall_s"] = round(time.time() - t, 1)
        meta_path = out / "capture.json"
        if not meta_path.is_file():
            got["error"] = proc.stderr[-400:]
            return got
        meta = json.loads(meta_path.read_text())
    times = meta.get("step_times_ms") or {}
    for phase, values in times.items():
        if values:
            got[phase] = round(
                statistics.median(values[1:] if phase == "unprofiled" else values), 3
            )
            got[f"{phase}_n"] = len(values)
    usage = meta.get("thread_per_step") or {}
    got["launchers_cpu"] = {
        p: round(u["launchers_cpu_ms_median"], 3)
        for p, u in usage.items()
        if isinstance(u, dict) and isinstance(u.get("launchers_cpu_ms_median"), int | float)
    }
    got["cupti_teardown_meta"] = meta.get("cupti_teardown")
    got["sleeping_syncs"] = meta.get("sleeping_syncs")
    if got.get("unprofiled") and got.get("after"):
        got["after_over_before"] = round(got["after"] / got["unprofiled"], 3)
    return got


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scripts", default="lstm_lm,ddpm_unet")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--wait", type=int, default=12)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--after", type=int, default=30, help="steps the script runs after the capture")
    p.add_argument("--budget-s", type=float, default=150, help="start no run after this")
    p.add_argument("--timeout", type=float, default=120)
    args = p.parse_args(argv)
    t0 = time.time()
    results = []
    for script in args.scripts.split(","):
        for r in range(args.rounds):
            for setting in SETTINGS if r % 2 == 0 else SETTINGS[::-1]:
                if time.time() - t0 > args.budget_s:
                    print(json.dumps({"skipped": script, "teardown": setting, "round": r}))
                    continue
                got = run_once(script, setting, args)
                got["round"] = r
                print(json.dumps(got), flush=True)
                results.append(got)
    print("\nscript      TEARDOWN_CUPTI  after/before (each run)")
    for script in args.scripts.split(","):
        for setting in SETTINGS:
            ratios = [
                g["after_over_before"]
                for g in results
                if g["script"] == script and g["teardown"] == setting and "after_over_before" in g
            ]
            print(f"{script:12s}{setting:>14s}  {ratios}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
