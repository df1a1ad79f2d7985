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


def own(name: str) -> tuple[dict, dict, dict]:
    """(fix name -> the tally's row, the report's fields, truth.json) of fixture `name`, on
    the ceilings its call kept (the H100 truth fixtures each keep theirs)."""
    import json

    folder = FIXTURES / name
    c = truth_tally.ceilings_of(folder, None)
    rows_ = {r["fix"]: r for r in truth_tally.rows_of(folder, c)}
    truth = json.loads((folder / "truth.json").read_text())
    return rows_, truth_tally.report_of(folder, c), truth


def tolerance(measured: float) -> float:
    """Issue 15's tolerance of a measured saving: max(25% of it, 2 ms)."""
    from membound.analysis.fix_check import tolerance_ms

    return tolerance_ms(measured)


def report(name: str) -> dict:
    """Today's whole JSON report (`report.json_report.to_dict`) of fixture `name`, on the
    ceilings its call kept."""
    from membound.report.json_report import to_dict

    folder = FIXTURES / name
    c = truth_tally.ceilings_of(folder, None)
    return to_dict(analyze([timeline_in(folder)], c))


def check_row(row: dict, measured: float, predicted: float | None, within: bool, by=None):
    """A tally row (`own`'s) says `measured` and `predicted` ms/step saved (to 0.01 ms; None:
    no prediction), whether that is within issue 15's tolerance and, where `by` is given, the
    remedy that predicted it."""
    import pytest

    fix = row["fix"]
    assert row["measured_ms"] == pytest.approx(measured, abs=0.01), fix
    if predicted is None:
        assert row["predicted_ms"] is None, fix
    else:
        assert row["predicted_ms"] == pytest.approx(predicted, abs=0.01), fix
    assert row["within"] is within, fix
    if by is not None:
        assert row["predicted_by"] == by, fix


def check_rows(name: str, fixes: dict) -> None:
    """Fixture `name`'s tally rows say, for each fix of `fixes` ({fix: (measured, predicted
    or None, within)}), what `check_row` checks."""
    rows, _, _ = own(name)
    for fix, (measured, predicted, within) in fixes.items():
        check_row(rows[fix], measured, predicted, within)
