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
