"""`membound analyze TRACE [TRACE ...]`: the analysis of existing kineto trace files."""

from __future__ import annotations

import contextlib
import re
import sys
from pathlib import Path

from membound.device.ceilings import Ceilings
from membound.errors import BadInput
from membound.report.options import FORMATS

HELP = (
    "analyze existing kineto trace files (.json, .json.gz, .json.xz): timeline, roofline, findings"
)

_SUFFIXES = (".json", ".json.gz", ".json.xz")


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


def _expand(items: list[str]) -> tuple[list[Path], list[str]]:
    """The trace files to analyse, and a note for each input skipped (a FIFO, a device, a
    folder's `.json` that is not a trace); the same file named twice is analysed once."""
    out: list[Path] = []
    notes: list[str] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found, skipped = _scan_folder(p)
            notes += skipped
            if not found:
                raise BadInput(
                    f"{p} holds no .json, .json.gz or .json.xz trace"
                    + (f" ({len(skipped)} skipped: see above)" if skipped else "")
                    + "; pass trace files or a folder of them."
                    + _unwritten_capture(p)
                )
            out += found
        elif p.is_file():
            out.append(p)
        elif p.exists():  # a FIFO would block the first read forever
            notes.append(f"{p} is {_kind(p)}, not a trace file: skipped")
        else:
            raise BadInput(
                f"{p} does not exist; pass a kineto trace file (.json, .json.gz or .json.xz) "
                "or a folder."
            )
    unique: dict[Path, Path] = {}
    for p in out:
        key = p.resolve()
        if key in unique:
            notes.append(f"{p} was given twice: analysed once")
        else:
            unique[key] = p
    if not unique:
        raise BadInput("no trace file to analyse among the inputs; pass kineto trace files.")
    return list(unique.values()), notes


def _scan_folder(folder: Path) -> tuple[list[Path], list[str]]:
    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:
        raise BadInput(
            f"cannot list the folder {folder} ({exc.strerror or exc}); check its permissions."
        ) from None
    found, skipped = [], []
    for q in entries:
        if (
            not q.name.endswith(_SUFFIXES)
            or ".membound." in q.name
            or ".ops." in q.name  # membound's ops pass: read with its timeline trace
            or re.search(r"\.capture\d+\.", q.name)  # a CUDA-graph capture's ops, likewise
            or q.name.startswith("capture.")  # diagnose's meta files, not traces
        ):
            continue
        if not q.is_file():
            if not q.is_dir():  # a folder named x.json is simply not a trace
                skipped.append(f"{q} is {_kind(q)}, not a trace file: skipped")
            continue
        if not _looks_like_trace(q):
            skipped.append(f"{q} is not a trace (no traceEvents near its start): skipped")
            continue
        found.append(q)
    return found, skipped


#: decompressed bytes searched for `"traceEvents"`: kineto writes it after deviceProperties
#: (about 1 kB per GPU) and distributedInfo
_SNIFF_BYTES = 1 << 20


def _looks_like_trace(path: Path) -> bool:
    """Whether a folder's `.json` may be a trace (a list of events, or an object holding
    "traceEvents" near its start); an unreadable one counts, so the loader says why."""
    from membound.trace.files import head

    try:
        first = head(path, _SNIFF_BYTES)
    except (OSError, EOFError, ValueError):
        return True
    start = first.lstrip()[:1]
    return start == b"[" or (start == b"{" and b'"traceEvents"' in first)


def _kind(p: Path) -> str:
    import stat

    try:
        mode = p.stat().st_mode
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _unwritten_capture(folder: Path) -> str:
    """What a capture that never wrote its trace left (its per-step marks), said in a clause."""
    from membound.trace.step_marks import read_step_marks

    marks = sorted(folder.glob("capture*.steps.jsonl"))
    if not marks:
        return ""
    n = len(read_step_marks(marks[0]))
    return (
        f" {marks[0].name} shows a capture that marked {n} step(s) and ended before writing "
        "its trace (killed, or os._exit): nothing there can be analysed."
    )


def _say(message: str) -> None:
    print(f"membound analyze: {message}", file=sys.stderr)


def _plan(args, traces: list[Path]) -> list[dict]:
    """Every output of every trace, checked before any analysis: [{json, html, annotate}]."""
    from membound.outputs import output_file, per_input, unique_labels

    json_path = output_file(args.json, "--json")
    html_path = output_file(args.html, "--html")
    annotate = None
    if args.annotate:
        annotate = output_file(args.annotate, "--annotate", folder_ok=True)
    many = len(traces) > 1
    labels = unique_labels(traces) if many else [None] * len(traces)
    plan = []
    for trace, label in zip(traces, labels, strict=True):
        outputs = {"json": json_path, "html": html_path, "annotate": None}
        if many:
            outputs["json"] = json_path and per_input(json_path, label, ".json")
            outputs["html"] = html_path and per_input(html_path, label, ".html")
        if args.annotate is not None:
            if annotate is None:  # next to the trace
                target = output_file(_default_annotated(trace), "--annotate")
            elif annotate.is_dir():
                target = annotate / (f"{label}.membound.json.gz" if many else
                                     Path(_default_annotated(trace)).name)  # fmt: skip
            else:
                target = per_input(annotate, label, ".json.gz") if many else annotate
            outputs["annotate"] = target
        for flag in ("json", "html", "annotate"):  # per-trace names: the same folder, checked
            if outputs[flag] is not None and many:
                output_file(outputs[flag], f"--{flag}")
        plan.append(outputs)
    return plan


def run(args) -> int:
    from membound.analysis import analyze
    from membound.analysis.ranks import analyze_ranks, is_rank_set
    from membound.outputs import output_file
    from membound.report import ReportOptions, emit

    traces, notes = _expand(args.traces)
    for note in notes:
        _say(note)
    ceilings = Ceilings.load(args.ceilings) if args.ceilings else None
    if is_rank_set(traces):  # [distributed] one trace per rank: one merged report
        options = ReportOptions(
            quiet=args.quiet,
            format=args.format,
            json_path=output_file(args.json, "--json"),
            html_path=output_file(args.html, "--html"),
        )
        _said(emit(analyze_ranks(traces, ceilings), options), options)
        return 0
    plan = _plan(args, traces)  # every output path checked before the first analysis
    for trace, outputs in zip(traces, plan, strict=True):
        with _load_progress(trace, quiet=args.quiet) as progress:
            analysis = analyze([trace], ceilings, progress=progress)
        options = ReportOptions(
            quiet=args.quiet,
            format=args.format,
            json_path=outputs["json"],
            html_path=outputs["html"],
            annotated_trace_path=outputs["annotate"],
        )
        _said(emit(analysis, options), options, trace if len(traces) > 1 else None)
    return 0


def _said(written, options, trace: Path | None = None) -> None:
    """Where each file went, on stderr, when the report itself does not say it (--quiet, or
    the report JSON on stdout)."""
    if not (options.quiet or options.format == "json"):
        return
    for what, path in written or ():
        _say(f"wrote {what}: {path}" + (f" (from {trace})" if trace is not None else ""))


def _default_annotated(trace: Path) -> str:
    from membound.report.annotate import default_path

    return str(default_path(trace))
