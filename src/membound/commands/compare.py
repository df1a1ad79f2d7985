"""`membound compare BEFORE.json AFTER.json`: did the fix work, and did it save what membound
predicted? Step time, GPU busy, the time each finding costs and the GPU's idle by cause,
before vs after, from two report JSONs (`analysis.compare`), with the prediction check
(`analysis.fix_check`)."""

from __future__ import annotations

import json
from pathlib import Path

HELP = (
    "compare two report JSONs (before/after a fix): step time, GPU busy, time lost per "
    "finding, and what the report before predicted the fix would save"
)


def add_arguments(parser) -> None:
    from membound.analysis.remedies import REMEDIES

    parser.add_argument("before", metavar="BEFORE.json", help="report JSON of the run before")
    parser.add_argument("after", metavar="AFTER.json", help="report JSON of the run after")
    parser.add_argument("--json", metavar="F", help="also write the comparison as JSON to F")
    parser.add_argument(
        "--fix",
        metavar="KEY[,KEY]",
        help="the fix(es) applied between the two runs, as the report names its remedies "
        f"({', '.join(REMEDIES)}); without it membound infers compile, bf16, a fused "
        "optimizer, pinning/prefetch or syncing less from what changed",
    )


def fixes_of(text: str | None) -> list[str] | None:
    """The remedy keys of `--fix`; BadInput (one line) for a key membound does not know."""
    from membound.analysis.remedies import REMEDIES
    from membound.errors import BadInput

    if text is None:
        return None
    keys = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in keys if k not in REMEDIES]
    if unknown or not keys:
        raise BadInput(
            f"--fix {text!r}: {'unknown remedy ' + ', '.join(unknown) if unknown else 'empty'}; "
            f"name one or more of {', '.join(REMEDIES)} (comma-separated)"
        )
    return keys


def run(args) -> int:
    from membound.analysis.compare import compare, load_report
    from membound.outputs import output_file
    from membound.report.compare import render

    fixes = fixes_of(args.fix)
    json_path = output_file(args.json, "--json")  # before reading anything
    before, after = load_report(args.before), load_report(args.after)
    cmp = compare(before, after, fixes)
    render(cmp, before_label=Path(args.before).name, after_label=Path(args.after).name)
    if json_path is not None:
        json_path.write_text(json.dumps(cmp, indent=2) + "\n")
    return 0
