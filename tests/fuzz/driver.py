"""Runs `membound.cli.main()` once per request, in this one process, for the fuzz suite.

Usage: python driver.py MEMORY_CAP_BYTES TIMEOUT_S. Reads one JSON object per line on stdin
({"argv": [...], "cwd": DIR}), answers one JSON line per request on stdout: {"rc", "stdout",
"stderr", "wall_s", "peak_rss"}. The outcome is what `python -m membound.cli ARGV` would give:
an uncaught exception prints its traceback and gives rc 1, SystemExit its code; rc null means
the request ran past TIMEOUT_S (SIGALRM). Peak RSS is VmHWM after resetting it per request
(/proc/self/clear_refs), under RLIMIT_AS = MEMORY_CAP for the whole process.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import signal
import sys
import time
import traceback


class _Timeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _Timeout


def _peak_rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _reset_peak() -> None:
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def run_one(argv: list[str], timeout_s: float) -> dict:
    from membound.cli import main

    out, err = io.StringIO(), io.StringIO()
    rc: int | None
    _reset_peak()
    start = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(argv)
            except SystemExit as exc:
                code = exc.code
                if code is None or isinstance(code, int):
                    rc = code or 0
                else:
                    print(code, file=sys.stderr)
                    rc = 1
            except _Timeout:
                rc = None
            except BaseException:  # what the interpreter would print before exiting 1
                traceback.print_exc()
                rc = 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return {
        "rc": rc,
        "stdout": out.getvalue(),
        "stderr": err.getvalue(),
        "wall_s": time.monotonic() - start,
        "peak_rss": _peak_rss(),
    }


def main() -> None:
    cap, timeout_s = int(sys.argv[1]), float(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    signal.signal(signal.SIGALRM, _alarm)
    sys.setrecursionlimit(1000)  # the interpreter's default, whatever a test runner set
    import membound.cli  # noqa: F401  (imported once, before the first request is timed)

    for line in sys.stdin:
        req = json.loads(line)
        os.chdir(req["cwd"])
        sys.stdout.write(json.dumps(run_one(req["argv"], timeout_s)) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
