"""`membound analyze TRACE [TRACE ...]`: the analysis of existing kineto trace files."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from membound.device.ceilings import Ceilings
from membound.errors import BadInput
from membound.report.options import FORMATS

HELP = "analyze existing kineto trace files (.json, .json.gz): timeline, roofline, findings"

_SUFFIXES = (".json", ".json.gz")


def add_arguments(parser) -> None:
    parser.add_argument(
        "traces", nargs="+", metavar="TRACE", help="trace files, or folders of them"
    )
    parser.add_argument("--json", metavar="F", help="write the JSON report (schema 1) here")
    parser.add_argument("--html", metavar="F", help="write a self-contained HTML report here")
    parser.add_argument(
        "--annotate",
        metavar="F|DIR",
        nargs="?",
        const="",
        help="write the trace with the findings as spans (for Perfetto); default next to the trace",
    )
    parser.add_argument(
        "--ceilings", metavar="JSON", help="ceilings to use (from `membound roofline --json`)"
    )
    parser.add_argument("--quiet", action="store_true", help="no terminal report, only the files")
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="rich",
        help="terminal report: rich (tables on a terminal at least 100 columns wide, else a "
        "list), plain (the list, no colour) or json (the report JSON on stdout)",
    )


#: traces at least this big get a progress bar while they load (a 1 GB trace takes ~30 s)
PROGRESS_MIN_BYTES = 64 << 20


@contextlib.contextmanager
def _load_progress(trace: Path, *, quiet: bool):
    """A transient rich progress bar on stderr while a big trace loads (terminal only)."""
    if quiet or not sys.stderr.isatty() or trace.stat().st_size < PROGRESS_MIN_BYTES:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn(f"loading {trace.name}"), BarColumn(), DownloadColumn(),
               TimeRemainingColumn())  # fmt: skip
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("load", total=trace.stat().st_size)
        yield lambda done, total: bar.update(task, completed=done, total=total)


def _expand(items: list[str]) -> list[Path]:
    out: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = sorted(
                q
                for q in p.iterdir()
                if q.name.endswith(_SUFFIXES)
                and ".membound." not in q.name
                and ".ops." not in q.name  # membound's ops pass: read with its timeline trace
                and not q.name.startswith("capture.")  # diagnose's meta files, not traces
            )
            if not found:
                raise BadInput(
                    f"{p} holds no .json or .json.gz trace; pass trace files or a folder of them."
                )
            out += found
        elif p.exists():
            out.append(p)
        else:
            raise BadInput(
                f"{p} does not exist; pass a kineto trace file (.json or .json.gz) or a folder."
            )
    return out


def _per_trace(path_arg: str | None, trace: Path, many: bool, suffix: str) -> str | None:
    """With several traces, a file argument gets the trace's stem appended."""
    if not path_arg or not many:
        return path_arg
    p = Path(path_arg)
    stem = trace.name.split(".json")[0]
    return str(p.with_name(f"{p.stem}.{stem}{suffix}"))


def run(args) -> int:
    from membound.analysis import analyze
    from membound.analysis.ranks import analyze_ranks, is_rank_set
    from membound.report import ReportOptions, emit

    traces = _expand(args.traces)
    ceilings = Ceilings.load(args.ceilings) if args.ceilings else None
    if is_rank_set(traces):  # [distributed] one trace per rank: one merged report
        options = ReportOptions(
            quiet=args.quiet, format=args.format, json_path=args.json, html_path=args.html
        )
        emit(analyze_ranks(traces, ceilings), options)
        return 0
    many = len(traces) > 1
    for trace in traces:
        with _load_progress(trace, quiet=args.quiet) as progress:
            analysis = analyze([trace], ceilings, progress=progress)
        annotate = None
        if args.annotate is not None:
            annotate = args.annotate or None
            if annotate and many and not Path(annotate).is_dir():
                annotate = _per_trace(annotate, trace, many, ".json.gz")
            annotate = annotate or _default_annotated(trace)
        options = ReportOptions(
            quiet=args.quiet,
            format=args.format,
            json_path=_per_trace(args.json, trace, many, ".json"),
            html_path=_per_trace(args.html, trace, many, ".html"),
            annotated_trace_path=annotate,
        )
        emit(analysis, options)
    return 0


def _default_annotated(trace: Path) -> str:
    from membound.report.annotate import default_path

    return str(default_path(trace))
