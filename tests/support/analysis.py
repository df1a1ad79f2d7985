"""Shortcuts the rule tests share: analyse one fixture, index findings by code."""

from __future__ import annotations

from membound.analysis import analyze
from support.paths import FIXTURES


def run(name: str, ceilings):
    """The analysis of fixture `name` (tests/fixtures/<name>/trace.json.gz)."""
    return analyze([FIXTURES / name / "trace.json.gz"], ceilings)


def by_code(analysis) -> dict:
    return {f.code: f for f in analysis.findings}
