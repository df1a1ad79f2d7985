"""`membound diagnose -- train.py args...`: profile a script unmodified, then analyze and report.

Order matters: the trace is written first and kept whatever happens next; analysis failing
(or not being available) costs one line on stderr, never the script's exit code. Each run
writes to a folder of its own (`membound-out/<script>-<UTC time>/`, `membound-out/latest`
pointing at the newest) unless `--out` names one. Lines on stderr say when the capture
starts and ends; as soon as it is written the analysis runs in a separate process (`membound
analyze`, which needs no GPU) while the script goes on, and its report prints when ready.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from membound.defaults import (
    API_RECORDS,
    CAPTURE_STEPS,
    CAPTURE_WAIT,
    CAPTURE_WARMUP,
    CUPTI_BUFFERS,
    DIAGNOSE_OUT,
    SYNC_MODES,
)
from membound.report.options import FORMATS

HELP = (
    "Run a Python training script unmodified under the profiler, find its steps, skip the "
    "first ones, record N, then explain where the GPU waits. Exits with the script's code."
)

_EPILOG = f"""\
examples:
  membound diagnose -- train.py --lr 0.1
  membound diagnose --steps 4 --json report.json -- python -m mypkg.train
Steps are the optimizer's steps; without an optimizer, DataLoader batches, else the model's
zero_grad calls (a hand-written update); or call membound.step() in the loop. Defaults run {CAPTURE_WAIT} steps without the profiler (the first
warms up: compilation, autotuning, allocator growth; membound times the others with its own
step timer, no sync), profile {CAPTURE_WARMUP} more as warm-up without keeping them, record
{CAPTURE_STEPS}, then time up to {CAPTURE_STEPS} more without the profiler (none with
--stop-after-capture). Every ms/step in the report refers to the unprofiled step.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = _EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument(
        "--wait",
        type=int,
        default=CAPTURE_WAIT,
        metavar="N",
        help=f"steps run unprofiled first; all but the first are timed (default {CAPTURE_WAIT})",
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=CAPTURE_WARMUP,
        metavar="N",
        help="steps profiled but discarded, so profiler start-up is not measured "
        f"(default {CAPTURE_WARMUP})",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=CAPTURE_STEPS,
        metavar="N",
        help=f"steps recorded (default {CAPTURE_STEPS})",
    )
    parser.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="directory for trace.json.gz and capture.json (default: a folder of this run's "
        f"own, ./{DIAGNOSE_OUT}/<script>-<UTC time>/, with ./{DIAGNOSE_OUT}/latest pointing at it)",
    )
    parser.add_argument("--json", metavar="F", help="write the report as JSON to F")
    parser.add_argument("--html", metavar="F", help="write the report as HTML to F")
    parser.add_argument(
        "--annotate",
        metavar="F",
        help="where to write the trace with the findings as spans, for Perfetto "
        "(default: trace.membound.json.gz next to the trace)",
    )
    parser.add_argument(
        "--no-annotate", action="store_true", help="do not write the annotated trace"
    )
    parser.add_argument(
        "--ceilings", metavar="JSON", help="ceilings to use (from `membound roofline --json`)"
    )
    parser.add_argument(
        "--stop-after-capture",
        action="store_true",
        help="end the script as soon as the steps are recorded (exit code 0)",
    )
    parser.add_argument(
        "--no-analyze", action="store_true", help="only write the trace; no analysis or report"
    )
    parser.add_argument(
        "--api-records",
        choices=API_RECORDS,
        default=API_RECORDS[0],
        help="CUDA API calls the timeline pass records: only those the timeline reads "
        "(launches, memcpys, memsets, syncs; the default: fewer records per step), or all",
    )
    parser.add_argument(
        "--cupti-buffers",
        choices=CUPTI_BUFFERS,
        default=CUPTI_BUFFERS[0],
        help="where CUPTI keeps the timeline pass's records: one buffer every launching "
        "thread fills (kineto's default) or one per thread (CUDA 12.3 on)",
    )
    parser.add_argument(
        "--syncs",
        choices=SYNC_MODES,
        default=SYNC_MODES[0],
        help="how the run's CUDA syncs wait. sleep-profiled (the default): they spin, as CUDA "
        "makes them, in the unprofiled steps before the capture (the loop as you run it, the "
        "step the report gives) and sleep in 3 more unprofiled steps and the profiled ones, "
        "where the threads' CPU time is then host work: the profiler's host cost is measured "
        "even where the GPU paces the step (CUDA 12.1 on; otherwise they spin). spin: "
        "CUDA's default throughout. sleep: the whole run (a loop that syncs many times a step "
        "may run a little slower)",
    )
    parser.add_argument(
        "--sleeping-syncs",
        dest="syncs",
        action="store_const",
        const="sleep",
        help="the same as --syncs sleep",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="rich",
        help="terminal report: rich (tables on a wide terminal, else a list), plain or json",
    )
    parser.add_argument(
        "--report-at-end",
        action="store_true",
        help="analyse in this process once the script ends, instead of in the background as "
        "soon as the capture is written",
    )
    parser.add_argument(
        "--no-norm-probe",
        action="store_true",
        help="do not measure membound's norm kernels' host cost after the script (on a GPU, "
        "the report then comes as soon as the capture is timed, not after the script)",
    )
    # [distributed] re-launch under torchrun; each rank captures, rank 0 merges
    parser.add_argument(
        "--nproc-per-node",
        type=int,
        metavar="N",
        help="run the script on N ranks under torchrun (one trace per rank, one merged report)",
    )
    parser.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        metavar="-- SCRIPT [ARGS...]",
        help="the script and its arguments: `train.py args`, `python train.py args` or `-m module args`",
    )


def run(args: argparse.Namespace) -> int:
    from membound._env import nccl_safe_env
    from membound.trace import distributed, runner
    from membound.trace.capture import Capture, CaptureDone

    target = runner.parse_command(args.command)
    runner.check(target)
    # checked before the script runs, and absolute: the script may chdir
    _resolve_paths(args, target)
    # [distributed] --nproc-per-node: the same command on N ranks under torchrun
    info = distributed.rank_info()
    nproc = getattr(args, "nproc_per_node", None)
    if nproc is not None and not info.distributed:
        if nproc < 1:
            from membound.errors import BadInput

            raise BadInput(f"--nproc-per-node {nproc}: give a number of processes >= 1.")
        return distributed.relaunch(nproc, _forward_args(args))
    if info.distributed:
        nccl_safe_env()
        distributed.clear_stale(Path(args.out), info.rank)
    started = time.time()
    ceilings = None
    if args.ceilings:  # read before the script runs: a bad file should not cost a whole run
        from membound.device.ceilings import Ceilings

        ceilings = Ceilings.load(args.ceilings)
    background = None
    if not (args.no_analyze or info.distributed or args.report_at_end):
        background = _Background(args)
    capture = Capture(
        steps=args.steps,
        wait=args.wait,
        warmup=args.warmup,
        out=args.out,
        stop_after_capture=args.stop_after_capture,
        api_records=getattr(args, "api_records", API_RECORDS[0]),
        cupti_buffers=getattr(args, "cupti_buffers", CUPTI_BUFFERS[0]),
        sleeping_syncs=getattr(args, "syncs", SYNC_MODES[0]),
        listener=_Progress(
            target, background, rank=info.rank if info.distributed else None, ceilings=ceilings
        ),
    )
    if not info.distributed or info.rank == 0:
        _say_plan(capture, target)
    with capture:
        state = capture.sleeping_syncs_state
        if capture.sync_mode == "sleep" and state not in (None, "ok"):
            _log(f"--syncs {capture.sync_mode}: the syncs still spin ({state})")
        outcome = runner.run(target, stop_exc=CaptureDone)
        capture.close(ended=outcome.ended)
    _say_capture(capture, target, outcome)
    if info.distributed:  # [distributed] rank 0 merges once every rank has written
        if info.rank == 0 and not args.no_analyze:
            _report_ranks(capture, args, ceilings, info.world_size, started)
        return outcome.exit_code
    if capture.written and capture.steps_captured and norm_probe_wanted(args):
        _probe_after_script(capture)
    if background is not None and background.deferred and not background.started:
        background.start(capture, now=True)  # the meta now holds the norm probe's result
    if background is not None and background.started:
        background.wait()
    elif capture.written and not args.no_analyze:
        if capture.steps_captured:
            _report(capture, args, ceilings)  # the capture ended early: analyse what was written
        else:
            _log(
                f"no recorded step was complete: nothing to analyse (the partial trace is "
                f"kept at {capture.trace_path})."
            )
    if capture.complete and not outcome.stopped:
        _log(
            "the script ran on after the capture; next time --stop-after-capture ends it as "
            "soon as the steps are recorded."
        )
    return outcome.exit_code


# ---- where things go, and what is said -----------------------------------------------
def _resolve_paths(args: argparse.Namespace, target) -> None:
    """Every output path checked (`membound.outputs`: a one-line error now, not after the
    run) and made absolute, and this run's own folder when --out names none. Folders are
    created (--out, with its parents, first: `--out O --json O/report.json` is fine); the
    folder of a --json/--html/--annotate file must exist otherwise."""
    from membound.outputs import output_dir

    if args.ceilings:
        args.ceilings = str(Path(args.ceilings).absolute())
    if args.out:
        wanted = Path(args.out).absolute()
        created = [q for q in (wanted, *wanted.parents) if not q.exists()]  # deepest first
        args.out = str(output_dir(args.out, "--out"))
        try:
            _check_files(args)
        except BaseException:
            for q in created:  # leave nothing behind for a run that never started
                try:
                    q.rmdir()
                except OSError:
                    break
            raise
        return
    _check_files(args)
    from membound.trace.distributed import rank_info

    if rank_info().distributed:  # a rank without --out: the launcher passes the run's folder
        args.out = str(output_dir(DIAGNOSE_OUT, "--out"))
        return
    parent = output_dir(DIAGNOSE_OUT, f"the run folder ./{DIAGNOSE_OUT} (--out)")
    try:
        args.out = str(run_folder(parent, target.label))
    except OSError as exc:
        from membound.errors import BadInput

        raise BadInput(f"cannot create a run folder in {parent} ({exc.strerror}).") from None


def _check_files(args: argparse.Namespace) -> None:
    from membound.outputs import output_file

    for name, folder_ok in (("json", False), ("html", False), ("annotate", True)):
        value = getattr(args, name, None)
        if value and not (name == "annotate" and args.no_annotate):
            setattr(args, name, str(output_file(value, f"--{name}", folder_ok=folder_ok)))


def run_folder(parent: Path, label: str, now: float | None = None) -> Path:
    """A new folder `<parent>/<script>-<UTC time>` (never an existing one) and `<parent>/latest`
    pointing at it (a symlink; a text file naming it where links are not allowed)."""
    last = label.split()[-1] if label.split() else "run"
    stem = last.rsplit(".", 1)[-1] if label.startswith("-m ") else Path(last).stem
    stem = stem.replace(".", "_") or "run"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    folder, n = parent / f"{stem}-{stamp}", 1
    while folder.exists():
        n += 1
        folder = parent / f"{stem}-{stamp}-{n}"
    folder.mkdir(parents=True)
    latest = parent / "latest"
    try:
        if latest.is_symlink() or latest.is_file():
            latest.unlink()
        latest.symlink_to(folder.name, target_is_directory=True)
    except OSError:
        if not latest.is_dir():
            latest.write_text(folder.name + "\n")
    return folder


def _say_plan(capture, target) -> None:
    first = capture.wait + capture.warmup + 1
    hint = (
        " (--stop-after-capture ends the script once they are recorded)"
        if sys.stdin is not None and sys.stdin.isatty() and not capture.stop_after_capture
        else ""
    )
    slept = capture.clock.slept
    sleeping = (
        f"; steps {first - capture.warmup - slept}-{first - capture.warmup - 1} time the host "
        "work with the CUDA syncs sleeping (--syncs)"
        if slept
        else ""
    )
    _log(
        f"running {target.label}: steps {first}-{first + capture.steps - 1} will be recorded "
        f"into {capture.out}{sleeping}{hint}"
    )


class _Progress:
    """The capture's listener: a line when recording starts and when the capture is written,
    then the analysis started in the background."""

    def __init__(self, target, background, rank, ceilings=None):
        self.target, self.background, self.rank = target, background, rank
        self.ceilings = ceilings

    def __call__(self, event: str, capture) -> None:
        who = f"rank {self.rank}: " if self.rank is not None else ""
        if event == "recording":
            _log(f"{who}capture started at step {capture.steps_taken + 1}")
        elif event == "complete":
            passes = " (timeline and ops passes)" if capture.two_pass else ""
            _log(f"{who}capture written{passes}: {capture.trace_path}")
            keep_ceilings(capture.out, self.ceilings)
            # the analysis waits until the steps after the capture are timed: run beside
            # them, it took host time from a host-bound loop and made them look slower
            if self.background is not None and not capture.timing_after:
                self.background.start(capture)
        elif event == "timed":  # the unprofiled steps after the capture are timed
            if self.background is not None and not self.background.started:
                self.background.start(capture)
        elif event == "os_exit":  # the last thing this process does: say what is on disk
            code = capture.exit_code
            if getattr(self.background, "deferred", False):
                self.background.start(capture, now=True)  # no norm probe: the script ends here
            if capture.written and capture.steps_captured:
                _log(
                    f"{who}{self.target.label} called os._exit({code}); the capture kept "
                    f"{capture.steps_captured} step(s) at {capture.trace_path}"
                    + ("" if self.background is not None and self.background.started else
                       f" (not analysed: run `membound analyze {capture.trace_path}`)")
                    + "."
                )  # fmt: skip
            else:
                _log(
                    f"{who}{self.target.label} called os._exit({code}) after "
                    f"{capture.steps_taken} step(s), before a recorded step was complete: no "
                    f"trace to analyse (the steps it reached are in {capture.steps_path})."
                )
        elif event == "os_exit_unwritten":
            _log(
                f"{who}{self.target.label} called os._exit({capture.exit_code}) from another "
                f"thread: the capture could not be written (the steps it reached are in "
                f"{capture.steps_path})."
            )


def keep_ceilings(out: Path, ceilings=None) -> Path | None:
    """Write the ceilings this capture is analysed with beside its trace (`ceilings.json`), so
    the report and any later `membound analyze` of the folder use the same: the given ones,
    else what this machine has for its GPU (a cached measurement, else the datasheet)."""
    path = Path(out) / "ceilings.json"
    if path.exists():
        return path
    if ceilings is None:
        import torch

        if not torch.cuda.is_available():
            return None  # a CPU-only trace needs none
        from membound.device.lookup import ceilings_for_name

        ceilings = ceilings_for_name(torch.cuda.get_device_name())
        if ceilings is None:
            return None
    from membound.report.json_report import write_ceilings

    return write_ceilings(ceilings, path)


class _Background:
    """`membound analyze` of the written capture in a process of its own (it needs no GPU and
    imports no torch), while the script goes on; its report prints when it is ready."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.proc = None
        self.started = False
        #: waiting for the script's end and the norm probe (`norm_probe_wanted`)
        self.deferred = False

    def start(self, capture, now: bool = False) -> None:
        """Start the analysis; on the capture's events (`now` False) it waits instead for
        the script's end where the norm probe will run then (`norm_probe_wanted`: its result
        is in the meta the analysis reads)."""
        if not now and norm_probe_wanted(self.args):
            if not self.deferred:
                _log("the report follows the script's end (membound's norm probe runs first)")
            self.deferred = True
            return
        import subprocess

        a = self.args
        cmd = [sys.executable, "-m", "membound", "analyze", str(capture.trace_path)]
        cmd += ["--json", a.json] if a.json else []
        cmd += ["--html", a.html] if a.html else []
        cmd += ["--ceilings", a.ceilings] if a.ceilings else []
        cmd += ["--format", a.format]
        if not a.no_annotate:
            cmd += ["--annotate", a.annotate or str(capture.out / "trace.membound.json.gz")]
        try:
            # below the script's priority: the analysis must not slow the training it explains
            nice = (lambda: os.nice(10)) if hasattr(os, "nice") else None
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, preexec_fn=nice)
            self.started = True
            _log("analysing in the background; the report follows when ready")
        except OSError as exc:  # analysed in this process after the script instead
            _log(f"could not start the analysis process ({exc}); analysing after the script")

    def wait(self) -> None:
        code = self.proc.wait()
        if code != 0:
            _log(
                f"the analysis exited with code {code}; the trace is kept: try "
                f"`membound analyze {self.proc.args[4]}`."
            )


def norm_probe_wanted(args: argparse.Namespace) -> bool:
    """Whether membound's norm kernels are measured after the script (`trace.norm_probe`):
    on a CUDA machine, for a single process that analyses, unless --no-norm-probe. torch is
    the script's: a script that never imported it has no norms on a GPU."""
    if getattr(args, "no_norm_probe", True) or getattr(args, "no_analyze", False):
        return False
    from membound.trace.distributed import rank_info

    torch = sys.modules.get("torch")
    try:
        return torch is not None and bool(torch.cuda.is_available()) and not rank_info().distributed
    except Exception:  # a broken CUDA setup costs the probe, not diagnose
        return False


def _probe_after_script(capture) -> None:
    """Measure membound's norm kernels at the trace's norm shape (`trace.norm_probe`), the
    timeline profiler's host cost per CUDA call (`trace.profiler_cost`) and what a worker
    batch costs the training thread (`trace.loader_probe`), and the trace's NCHW
    interpolations in channels_last (`trace.layout_probe`), and its convolutions, matmuls and
    norms as recorded, in bf16 and in channels_last (`trace.dtype_probe`) into the capture meta;
    any failure is one line (and a note in the meta), never diagnose's."""
    from membound.trace import dtype_probe, layout_probe, loader_probe, norm_probe, profiler_cost

    for probe in (norm_probe, profiler_cost, loader_probe, layout_probe, dtype_probe):
        try:
            _log(probe.probe(capture.meta_path))
        except Exception as exc:
            _log(f"{probe.LABEL} ({type(exc).__name__}: {exc}).")


# [distributed] ------------------------------------------------------------------------
def _forward_args(args: argparse.Namespace) -> list[str]:
    """The diagnose command line each rank runs (everything but --nproc-per-node)."""
    out = ["diagnose", "--wait", str(args.wait), "--warmup", str(args.warmup)]
    out += ["--steps", str(args.steps), "--out", str(args.out)]
    for flag, value in (
        ("--json", args.json),
        ("--html", args.html),
        ("--ceilings", args.ceilings),
    ):
        if value:
            out += [flag, str(Path(value).absolute())]
    out += ["--format", args.format] if getattr(args, "format", "rich") != "rich" else []
    out += ["--stop-after-capture"] if args.stop_after_capture else []
    out += ["--no-analyze"] if args.no_analyze else []
    api = getattr(args, "api_records", API_RECORDS[0])
    out += ["--api-records", api] if api != API_RECORDS[0] else []
    buffers = getattr(args, "cupti_buffers", CUPTI_BUFFERS[0])
    out += ["--cupti-buffers", buffers] if buffers != CUPTI_BUFFERS[0] else []
    syncs = getattr(args, "syncs", SYNC_MODES[0])
    out += ["--syncs", syncs] if syncs != SYNC_MODES[0] else []
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    return [*out, "--", *command]


def _report_ranks(capture, args, ceilings, world_size: int, started: float) -> None:
    from membound.trace import distributed

    traces, missing = distributed.wait_for_ranks(capture.out, world_size, since=started - 30)
    if missing:
        _log(f"no trace from rank(s) {missing} in {capture.out}; merging the others")
    if not traces:
        return
    try:
        from membound.analysis.ranks import analyze_ranks
        from membound.report import ReportOptions, emit

        options = ReportOptions(format=args.format, json_path=args.json, html_path=args.html)
        emit(analyze_ranks(traces, ceilings), options)
    except Exception as exc:  # the traces are kept; analysis is a bonus on top of them
        _log(
            f"merged analysis failed ({type(exc).__name__}: {exc}); the traces are kept: "
            f"try `membound analyze {capture.out}`."
        )


def _say_capture(capture, target, outcome) -> None:
    where = capture.trace_path if capture.written else capture.out
    if outcome.syntax_error is not None and capture.steps_taken == 0:
        _log(
            f"{target.label} has a syntax error at {outcome.syntax_error}; it did not run and "
            "nothing was captured."
        )
        return
    if outcome.ended is not None and capture.source is None:  # nothing to keep: say what happened
        cause = outcome.error if outcome.error and not outcome.interrupted else None
        _log(
            f"{target.label} {outcome.ended}"
            + (f" ({cause})" if cause else "")
            + " before its first step; nothing was captured."
        )
        return
    if outcome.interrupted:
        how = (
            "interrupted (Ctrl-C)"
            if outcome.signal == "SIGINT"
            else f"terminated ({outcome.signal})"
        )
        msg = (
            f"{target.label} was {how}; the capture kept "
            f"{capture.steps_captured} step(s) at {where}"
        )
    elif outcome.error is not None:
        msg = (
            f"{target.label} crashed ({outcome.error}); the capture kept "
            f"{capture.steps_captured} step(s) at {where}"
        )
    elif outcome.stopped:
        msg = f"stopped {target.label} after capturing {capture.steps_captured} step(s) at {where}"
    else:
        msg = f"captured {capture.steps_captured} step(s) of {target.label} at {where}"
    if not capture.written:
        msg += " (no trace written)"
    _log(msg + ".")
    for note in capture.notes:
        _log(note)


def _report(capture, args: argparse.Namespace, ceilings) -> None:
    annotated = None
    if not args.no_annotate:
        annotated = args.annotate or str(capture.out / "trace.membound.json.gz")
    try:
        from membound.analysis import analyze
        from membound.report import ReportOptions, emit

        analysis = analyze(
            [str(capture.trace_path)], ceilings=ceilings
        )  # capture notes from its meta
        options = ReportOptions(
            format=args.format,
            json_path=args.json,
            html_path=args.html,
            annotated_trace_path=annotated,
        )
        emit(analysis, options)
    except Exception as exc:  # the trace is kept; analysis is a bonus on top of it
        _log(
            f"analysis failed ({type(exc).__name__}: {exc}); the trace is kept at "
            f"{capture.trace_path}: try `membound analyze {capture.trace_path}`."
        )


def _log(message: str) -> None:
    print(f"membound diagnose: {message}", file=sys.stderr)
