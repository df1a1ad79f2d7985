"""The contract every input must meet, and the two ways the suite runs the CLI to check it.

Contract (issue 17): the command exits 0 with a sane report, or exits 2 with exactly one line
on stderr; never a traceback, another exit code, a run over `TIMEOUT_S` or a peak RSS over
`MEMORY_CAP`.

`run_subprocess` runs `python -m membound.cli ...` the way a user does, one process per input,
under RLIMIT_AS = MEMORY_CAP (a clean `analyze` maps ~300 MB, so the cap never bites a sane
run, and RSS can never pass the address-space limit: the cap truly means <= 2 GiB RSS) and
reads the child's peak RSS from wait4(). `Driver` runs many inputs in one long-lived process
(tests/fuzz/driver.py) that calls `membound.cli.main()` per input and answers one JSON line
each: the same outcome, without ~1.3 s of interpreter start-up per input.
"""

from __future__ import annotations

import json
import math
import os
import re
import resource
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_S = 30.0
MEMORY_CAP = 2 << 30  # bytes: address space of the child, hence also its RSS
SRC = Path(__file__).resolve().parents[2] / "src"
DRIVER = Path(__file__).with_name("driver.py")


@dataclass
class Outcome:
    rc: int | None  # None: killed at the timeout; negative: killed by that signal
    stdout: str
    stderr: str
    wall_s: float
    peak_rss: int  # bytes

    def last_stderr_line(self) -> str:
        lines = self.stderr.strip().splitlines()
        return lines[-1] if lines else ""

    def summary(self) -> str:
        return (f"exit {self.rc}, {self.wall_s:.2f} s, peak RSS {self.peak_rss >> 20} MiB, "
                f"last stderr line: {self.last_stderr_line()!r}")  # fmt: skip


def child_env(cache_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    env["MEMBOUND_CACHE_DIR"] = str(cache_dir)  # never the user's cached ceilings
    env["COLUMNS"] = "100"
    return env


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def run_subprocess(argv: list[str], workdir: Path, cache_dir: Path) -> Outcome:
    """`python -m membound.cli *argv` in its own process group, limited and measured."""
    out, err = workdir / "stdout.txt", workdir / "stderr.txt"
    start = time.monotonic()
    with out.open("wb") as fo, err.open("wb") as fe:
        proc = subprocess.Popen(
            [sys.executable, "-m", "membound.cli", *argv],
            stdin=subprocess.DEVNULL, stdout=fo, stderr=fe, cwd=workdir,
            env=child_env(cache_dir), preexec_fn=_limit_memory, start_new_session=True,
        )  # fmt: skip
        rc: int | None = None
        usage = None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                rc = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() - start > TIMEOUT_S:
                os.killpg(proc.pid, signal.SIGKILL)
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.01)
        proc.returncode = rc if rc is not None else -9  # reaped here, not by Popen
    return Outcome(
        rc=rc,
        stdout=out.read_text(errors="replace"),
        stderr=err.read_text(errors="replace"),
        wall_s=time.monotonic() - start,
        peak_rss=usage.ru_maxrss * 1024,  # KiB on Linux
    )


class Driver:
    """One `driver.py` process answering one JSON line per input; restarted if it dies."""

    def __init__(self, cache_dir: Path):
        self.cache_dir = cache_dir
        self.proc: subprocess.Popen | None = None

    def _start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(DRIVER), str(MEMORY_CAP), str(TIMEOUT_S)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=child_env(self.cache_dir), text=True, bufsize=1, start_new_session=True,
        )  # fmt: skip

    def run(self, argv: list[str], workdir: Path) -> Outcome:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        start = time.monotonic()
        self.proc.stdin.write(json.dumps({"argv": argv, "cwd": str(workdir)}) + "\n")
        self.proc.stdin.flush()
        # the driver's own alarm stops a slow input at TIMEOUT_S; this is the backstop
        ready, _, _ = select.select([self.proc.stdout], [], [], TIMEOUT_S + 15)
        line = self.proc.stdout.readline() if ready else ""
        if not line:  # hung past its own alarm, or died (a segfault, the OOM killer)
            os.killpg(self.proc.pid, signal.SIGKILL)
            rc = self.proc.wait()
            self.proc = None
            return Outcome(None if not ready else rc, "", f"driver died: exit {rc}",
                           time.monotonic() - start, 0)  # fmt: skip
        r = json.loads(line)
        return Outcome(r["rc"], r["stdout"], r["stderr"], r["wall_s"], r["peak_rss"])

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


# ---------------------------------------------------------------------------------------------
# what a sane result is

#: numbers that are shares of a whole: 0..1 (names from a real report: gpu_busy_fraction,
#: ops_costed_fraction, share_of_step, share_of_gpu_time, step_shares.*, ...). Not included:
#: achieved_*_fraction and fraction_of_attainable, rates against a ceiling, which a measured op
#: may legitimately pass (L2-resident data shows above the copy roof); those must be >= 0.
_SHARE = re.compile(r"(^|_)(fraction|share|shares)(_|$)")
_RATE = re.compile(r"^(achieved_\w+_fraction|fraction_of_attainable)$")
#: durations: ms/s figures, ms per step, idle by cause (ms per step) are never negative
_DURATION = re.compile(r"(_ms|_s|_ms_per_step|duration|seconds)$|^(busy|idle)_ms")
_DURATION_PARENTS = ("idle_breakdown", "idle_by_cause")
#: numbers that are signed by nature (a host mark may trail the GPU; timestamps may be anywhere)
_SIGNED = re.compile(r"(_us|host_lead_ms|host_lead_max_ms)$")
#: a remedy's predicted saving and its share of the step are signed: where its what-if or its
#: runtime says it loses (compile's replay, a layout measured slower, CUDA graphs' compiled
#: runtime), the report ranks it last with the loss (`analysis.remedies`)
_SIGNED_REMEDY = ("saving_ms_per_step", "share_of_step")
_NAN_WORD = re.compile(r"\b(nan|inf|infinity)%?\b", re.IGNORECASE)


def _reject_constant(token: str):
    raise ValueError(f"{token} in the JSON")


def parse_strict(text: str):
    """JSON as a strict reader sees it: NaN and Infinity are not JSON."""
    return json.loads(text, parse_constant=_reject_constant)


def report_violations(report) -> list[str]:
    """Why a report (analyze's --json) is not sane; empty when it is."""
    bad: list[str] = []
    if not isinstance(report, dict):
        return [f"report is a {type(report).__name__}, not an object"]
    steps = report.get("steps")
    if not isinstance(steps, dict) or not isinstance(steps.get("count"), int) or steps["count"] < 1:
        bad.append(f"exit 0 with no usable steps (steps={str(steps)[:120]})")

    def walk(obj, path: str, key: str, parent: str) -> None:
        if isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, f"{path}.{k}", str(k), key)
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                walk(v, f"{path}[{i}]", key, parent)
        elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
            if not math.isfinite(obj):
                bad.append(f"{path} = {obj}")
            elif _RATE.search(key):
                if obj < 0:
                    bad.append(f"{path} = {obj} < 0")
            elif parent == "remedies" and key in _SIGNED_REMEDY:
                if key == "share_of_step" and obj > 1:  # a loss has no floor; a saving, the step
                    bad.append(f"{path} = {obj} > 1")
            elif _SHARE.search(key) or parent == "step_shares":
                if not 0 <= obj <= 1:
                    bad.append(f"{path} = {obj} outside 0..1")
            elif _SIGNED.search(key):
                pass
            elif _DURATION.search(key) or parent in _DURATION_PARENTS:
                if obj < 0:
                    bad.append(f"{path} = {obj} < 0")
            elif key in ("bytes", "flops", "calls", "count", "kernels") and obj < 0:
                bad.append(f"{path} = {obj} < 0")

    walk(report, "", "", "")
    if isinstance(steps, dict) and isinstance(steps.get("count"), int) and steps["count"] >= 1:
        median = steps.get("median_step_ms")
        if not isinstance(median, (int, float)) or isinstance(median, bool) or median <= 0:
            bad.append(f".steps.median_step_ms = {median!r} with {steps['count']} steps")
    for i, s in enumerate(steps.get("per_step") or [] if isinstance(steps, dict) else []):
        if isinstance(s, dict) and isinstance(s.get("wall_ms"), (int, float)) and s["wall_ms"] <= 0:
            bad.append(f".steps.per_step[{i}].wall_ms = {s['wall_ms']}: a step takes time")
    return bad


def contract_violations(o: Outcome, json_out: Path | None, *, check_report=True) -> list[str]:
    """Why an outcome breaks the contract; empty when it keeps it."""
    bad: list[str] = []
    if o.rc is None:
        bad.append(f"no exit within {TIMEOUT_S:.0f} s")
    if o.peak_rss > MEMORY_CAP:
        bad.append(f"peak RSS {o.peak_rss >> 20} MiB over {MEMORY_CAP >> 20} MiB")
    if "Traceback" in o.stderr or "MemoryError" in o.stderr:
        bad.append("a traceback on stderr")
    if o.rc == 2:
        lines = o.stderr.strip("\n").splitlines()
        if len(lines) != 1 or not lines[0].strip():
            bad.append(f"exit 2 with {len(lines)} stderr lines, not exactly one")
    elif o.rc == 0:
        if _NAN_WORD.search(o.stdout):
            bad.append(f"'{_NAN_WORD.search(o.stdout).group()}' printed on stdout")
        if json_out is not None:
            if not json_out.exists():
                bad.append(f"exit 0 but {json_out.name} not written")
            else:
                try:
                    doc = parse_strict(json_out.read_text())
                except ValueError as exc:
                    bad.append(f"the JSON written does not parse strictly: {exc}")
                else:
                    if check_report:
                        bad += report_violations(doc)
    elif o.rc is not None:
        bad.append(f"exit {o.rc}, neither 0 nor 2")
    return bad
