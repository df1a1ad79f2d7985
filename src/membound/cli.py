"""The `membound` command: parses arguments and hands each verb to its command module.

Verbs live in `membound.commands.<verb>`; each module defines `HELP`, `add_arguments(parser)`
and `run(args) -> int`. Adding a verb means adding a module and one line to `VERBS`.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from membound import __version__
from membound.errors import MemboundError

VERBS = ("roofline", "diagnose", "analyze", "demo", "compare")


def _load(verb: str):
    return importlib.import_module(f"membound.commands.{verb.replace('-', '_')}")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="membound",
        description=(
            "Find where a PyTorch program waits on data movement instead of computing: "
            "measured roofline, explained timeline, and the fixes."
        ),
    )
    parser.add_argument("--version", action="version", version=f"membound {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for verb in VERBS:
        if only is not None and verb != only:
            # another verb's module is not imported: `membound analyze` starts faster
            sub.add_parser(verb)
            continue
        try:
            module = _load(verb)
        except ModuleNotFoundError as exc:  # a verb whose module is not written yet
            if exc.name != f"membound.commands.{verb}":
                raise
            continue
        p = sub.add_parser(verb, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    verb = args_in[0] if args_in and args_in[0] in VERBS else None
    parser = build_parser(only=verb)
    args = parser.parse_args(args_in)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except MemboundError as exc:
        print(f"membound {args.verb}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"membound {args.verb}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
