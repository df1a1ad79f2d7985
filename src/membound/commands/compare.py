"""`membound compare BEFORE.json AFTER.json`: did the fix work? Step time, GPU busy and the
time each finding costs, before vs after, from two report JSONs (`analysis.compare`)."""

from __future__ import annotations

import json
from pathlib import Path

HELP = "compare two report JSONs (before/after a fix): step time, GPU busy, time lost per finding"


def add_arguments(parser) -> None:
    parser.add_argument("before", metavar="BEFORE.json", help="report JSON of the run before")
    parser.add_argument("after", metavar="AFTER.json", help="report JSON of the run after")
    parser.add_argument("--json", metavar="F", help="also write the comparison as JSON to F")


def run(args) -> int:
    from membound.analysis.compare import compare, load_report
    from membound.outputs import output_file
    from membound.report.compare import render

    json_path = output_file(args.json, "--json")  # before reading anything
    before, after = load_report(args.before), load_report(args.after)
    cmp = compare(before, after)
    render(cmp, before_label=Path(args.before).name, after_label=Path(args.after).name)
    if json_path is not None:
        json_path.write_text(json.dumps(cmp, indent=2) + "\n")
    return 0
