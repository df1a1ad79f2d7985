"""Run a Python script or module in this process the way `python` would, and return its exit code.

`membound diagnose` needs the script inside its own interpreter so the profiler and the step
hooks see it; this module gives the script the same `sys.argv`, `sys.path[0]` and `__main__`
it would get from `python script.py args` / `python -m module args`, and turns however it ends
(normal return, `sys.exit`, an uncaught exception) into the exit code `python` would return.

A SIGTERM while the script runs takes the path Ctrl-C takes (the run stops where it is, what
was captured is written), then the exit code a process killed by it reports (143); the
handler is installed only where the script has none of its own, and removed after.
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import signal
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path

from membound.errors import BadInput


@dataclass
class Target:
    """What to run: a script path or a module name, and the argv it sees (without argv[0])."""

    script: str | None
    module: str | None
    args: list[str]

    @property
    def label(self) -> str:
        return self.script if self.script is not None else f"-m {self.module}"


@dataclass
class Outcome:
    """How the script ended."""

    exit_code: int
    error: str | None = None  # "ValueError: ..." for an uncaught exception
    stopped: bool = False  # ended by the runner after the capture completed
    interrupted: bool = False  # Ctrl-C (SIGINT) or SIGTERM: stopped, it did not crash
    signal: str | None = None  # "SIGINT", "SIGTERM": the signal that stopped it
    syntax_error: str | None = None  # "file:line (message)": the script never ran
    #: how it ended when not by itself, for the capture's notes ("crashed"); None: it ended
    ended: str | None = None


class Terminated(BaseException):
    """Raised in the script's main thread by SIGTERM: it unwinds like Ctrl-C, through the
    script's `finally` blocks, but no `except Exception` of the script stops it."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


#: signals turned into `Terminated` while the script runs (SIGINT is Python's own
#: KeyboardInterrupt already)
CAUGHT_SIGNALS = ("SIGTERM",)


def parse_command(command: list[str]) -> Target:
    """Accept `python train.py a b`, `train.py a b`, `python -m pkg.mod a b` or `-m pkg.mod a b`."""
    cmd = list(command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if cmd and _is_python(cmd[0]):
        cmd = cmd[1:]
        # Options that only tune an interpreter (-u, -B, -O, -X opt, -W opt) are dropped: this
        # interpreter is already running. Any other would change how the script runs.
        while cmd and cmd[0].startswith("-") and cmd[0] != "-m":
            if cmd[0] in ("-X", "-W"):
                cmd = cmd[2:]
                continue
            if cmd[0] in ("-u", "-B", "-O", "-OO") or cmd[0].startswith(("-X", "-W")):
                cmd = cmd[1:]
                continue
            raise BadInput(
                f"python option {cmd[0]} is not supported under membound diagnose; "
                "give the script (or -m module) directly after --."
            )
    if not cmd:
        raise BadInput(
            "no script given: write `membound diagnose [options] -- train.py args...` "
            "or `-- -m package.module args...`."
        )
    if cmd[0] == "-m":
        if len(cmd) < 2:
            raise BadInput("-m needs a module name, e.g. `membound diagnose -- -m mypkg.train`.")
        return Target(script=None, module=cmd[1], args=cmd[2:])
    return Target(script=cmd[0], module=None, args=cmd[1:])


def _is_python(word: str) -> bool:
    name = os.path.basename(word)
    return name.startswith("python") and not name.endswith(".py")


def check(target: Target) -> None:
    """Fail early, with one sentence, if the script or module cannot be found."""
    if target.script is not None:
        path = Path(target.script)
        if not path.exists():
            raise BadInput(f"script {target.script} does not exist; check the path after --.")
        if path.is_dir() and not (path / "__main__.py").exists():
            raise BadInput(f"{target.script} is a directory without __main__.py; give a script.")
        return
    sys.path.insert(0, os.getcwd())  # as `python -m` would, so the lookup matches the run
    try:
        spec = importlib.util.find_spec(target.module)
    except (ImportError, ValueError):
        spec = None
    finally:
        sys.path.pop(0)
    if spec is None:
        raise BadInput(
            f"no module named {target.module} (searched the current directory and sys.path)."
        )


def _raise_terminated(signum, frame) -> None:
    raise Terminated(signum)


def _install_signals() -> dict[int, object]:
    """`Terminated` on the caught signals, where nothing else handles them; {signum: previous}."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    saved = {}
    for name in CAUGHT_SIGNALS:
        signum = getattr(signal, name, None)
        if signum is None or signal.getsignal(signum) is not signal.SIG_DFL:
            continue
        saved[signum] = signal.signal(signum, _raise_terminated)
    return saved


def _restore_signals(saved: dict[int, object]) -> None:
    for signum, previous in saved.items():
        if signal.getsignal(signum) is _raise_terminated:
            signal.signal(signum, previous)


def run(target: Target, stop_exc: type[BaseException] | None = None) -> Outcome:
    """Run the target as `__main__` with its own argv; return how it ended (never raises)."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    saved_signals = _install_signals()
    try:
        if target.script is not None:
            script = os.path.abspath(target.script)
            sys.argv = [target.script, *target.args]
            sys.path.insert(0, os.path.dirname(script) if os.path.isfile(script) else script)
            runpy.run_path(script, run_name="__main__")
        else:
            sys.argv = [target.module, *target.args]  # runpy replaces argv[0] with the file
            sys.path.insert(0, os.getcwd())
            runpy.run_module(target.module, run_name="__main__", alter_sys=True)
        return Outcome(0)
    except SystemExit as exc:
        return Outcome(_exit_code(exc.code))
    except KeyboardInterrupt:
        # What the shell reports for a Ctrl-C'd python; the capture so far is still analysed.
        return Outcome(
            130,
            error="interrupted",
            interrupted=True,
            signal="SIGINT",
            ended="was interrupted (Ctrl-C)",
        )
    except Terminated as exc:
        name = signal.Signals(exc.signum).name
        return Outcome(
            128 + exc.signum,
            error=f"terminated by {name}",
            interrupted=True,
            signal=name,
            ended=f"was terminated ({name})",
        )
    except BaseException as exc:
        if stop_exc is not None and isinstance(exc, stop_exc):
            return Outcome(0, stopped=True)
        _print_script_traceback(exc)
        where = None
        if isinstance(exc, SyntaxError):
            where = f"{exc.filename}:{exc.lineno} ({exc.msg})"
        return Outcome(
            1,
            error=f"{type(exc).__name__}: {exc}",
            syntax_error=where,
            ended="has a syntax error" if where else "crashed",
        )
    finally:
        _restore_signals(saved_signals)
        sys.argv, sys.path[:] = saved_argv, saved_path
        sys.stdout.flush()


def _exit_code(code: object) -> int:
    """What the interpreter does with `SystemExit(code)`."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF if code >= 0 else code % 256
    print(code, file=sys.stderr)
    return 1


def _frame_file(tb) -> str:
    name = tb.tb_frame.f_code.co_filename
    return name if name.startswith("<") else os.path.abspath(name)


def _print_script_traceback(exc: BaseException) -> None:
    """Print the traceback as `python` would: without runpy's and membound's own frames."""
    tb = exc.__traceback__
    # runpy is a frozen module on some Pythons: its frames are named "<frozen runpy>".
    here = {os.path.abspath(__file__), os.path.abspath(runpy.__file__), "<frozen runpy>"}
    while tb is not None and _frame_file(tb) in here:
        tb = tb.tb_next
    sys.stdout.flush()
    traceback.print_exception(type(exc), exc, tb, file=sys.stderr)
