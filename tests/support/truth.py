"""The recorded truth fixtures (`tests/fixtures/h200_real_*`, each with its truth.json) as
the truth tests read them: today's analysis of a fixture, and `benchmarks/truth_tally.py`'s
rows of it (predicted against measured, per fix)."""

from __future__ import annotations

from membound.analysis import analyze
from membound.trace.capture_meta import timeline_in
from support.paths import FIXTURES, benchmark

truth_tally = benchmark("truth_tally")


def rows(name: str, ceilings) -> dict[str, dict]:
    """fix name -> the tally's row for fixture `h200_real_<name>`."""
    return {r["fix"]: r for r in truth_tally.rows_of(FIXTURES / f"h200_real_{name}", ceilings)}


def analysis(name: str, ceilings):
    """Today's analysis of fixture `h200_real_<name>`'s timeline trace."""
    return analyze([timeline_in(FIXTURES / f"h200_real_{name}")], ceilings)
