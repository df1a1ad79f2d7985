"""`membound diagnose -- train.py args...`: profile a script unmodified, then analyze and report.

Order matters: the trace is written first and kept whatever happens next; analysis failing
(or not being available) costs one line on stderr, never the script's exit code.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from membound.defaults import CAPTURE_STEPS, CAPTURE_WAIT, CAPTURE_WARMUP, DIAGNOSE_OUT

HELP = (
    "Run a Python training script unmodified under the profiler, find its steps, skip the "
    "first ones, record N, then explain where the GPU waits. Exits with the script's code."
)

_EPILOG = f"""\
examples:
  membound diagnose -- train.py --lr 0.1
  membound diagnose --steps 4 --json report.json -- python -m mypkg.train
Steps are the optimizer's steps; without an optimizer, DataLoader batches; or call
membound.step() in the loop. Defaults run {CAPTURE_WAIT} steps without the profiler (the first
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
        default=DIAGNOSE_OUT,
        metavar="DIR",
        help=f"directory for trace.json.gz and capture.json (default ./{DIAGNOSE_OUT})",
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
        distributed.clear_stale(Path(args.out).absolute(), info.rank)
    started = time.time()
    ceilings = None
    if args.ceilings:  # read before the script runs: a bad file should not cost a whole run
        from membound.device.ceilings import Ceilings

        ceilings = Ceilings.load(args.ceilings)
    capture = Capture(
        steps=args.steps,
        wait=args.wait,
        warmup=args.warmup,
        out=args.out,
        stop_after_capture=args.stop_after_capture,
    )
    with capture:
        outcome = runner.run(target, stop_exc=CaptureDone)
    _say_capture(capture, target, outcome)
    if info.distributed:  # [distributed] rank 0 merges once every rank has written
        if info.rank == 0 and not args.no_analyze:
            _report_ranks(capture, args, ceilings, info.world_size, started)
        return outcome.exit_code
    if capture.written and not args.no_analyze:
        _report(capture, args, ceilings)
    return outcome.exit_code


# [distributed] ------------------------------------------------------------------------
def _forward_args(args: argparse.Namespace) -> list[str]:
    """The diagnose command line each rank runs (everything but --nproc-per-node)."""
    out = ["diagnose", "--wait", str(args.wait), "--warmup", str(args.warmup)]
    out += ["--steps", str(args.steps), "--out", str(Path(args.out).absolute())]
    for flag, value in (
        ("--json", args.json),
        ("--html", args.html),
        ("--ceilings", args.ceilings),
    ):
        if value:
            out += [flag, str(Path(value).absolute())]
    out += ["--stop-after-capture"] if args.stop_after_capture else []
    out += ["--no-analyze"] if args.no_analyze else []
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

        options = ReportOptions(json_path=args.json, html_path=args.html)
        emit(analyze_ranks(traces, ceilings), options)
    except Exception as exc:  # the traces are kept; analysis is a bonus on top of them
        _log(
            f"merged analysis failed ({type(exc).__name__}: {exc}); the traces are kept: "
            f"try `membound analyze {capture.out}`."
        )


def _say_capture(capture, target, outcome) -> None:
    where = capture.trace_path if capture.written else capture.out
    if outcome.error is not None:
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

        analysis = analyze([str(capture.trace_path)], ceilings=ceilings)  # capture notes from its meta
        options = ReportOptions(
            json_path=args.json, html_path=args.html, annotated_trace_path=annotated
        )
        emit(analysis, options)
    except Exception as exc:  # the trace is kept; analysis is a bonus on top of it
        _log(
            f"analysis failed ({type(exc).__name__}: {exc}); the trace is kept at "
            f"{capture.trace_path}: try `membound analyze {capture.trace_path}`."
        )


def _log(message: str) -> None:
    print(f"membound diagnose: {message}", file=sys.stderr)
