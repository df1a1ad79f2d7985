"""Where the tests' inputs live."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
#: recorded and synthetic traces, one folder per scenario (`tests/fixtures/README.md`)
FIXTURES = TESTS / "fixtures"
#: the ceilings measured on the H200 the `h200_*` fixtures were recorded on
H200_CEILINGS = FIXTURES / "h200_ceilings.json"
BENCHMARKS = ROOT / "benchmarks"
EXAMPLES = ROOT / "examples"


def benchmark(name: str):
    """The module benchmarks/<name>.py, imported with that folder on sys.path for the import
    only (the benchmarks import their siblings by bare name)."""
    import importlib
    import sys

    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCHMARKS))
