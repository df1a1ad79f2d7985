"""Analysis of a loaded trace: timeline, roofline join, findings.

`analyze(paths)` is the one entry point `membound analyze` and `membound diagnose` share
(`analysis.pipeline`).
"""

from __future__ import annotations

from membound.analysis.findings import RANK_RULES, RULES, Finding, rank_rule, rule
from membound.analysis.pipeline import analyze, analyze_trace, merge
from membound.analysis.result import IDLE_CAUSES, Analysis, OpRow, Step

__all__ = [
    "IDLE_CAUSES",
    "RANK_RULES",
    "RULES",
    "Analysis",
    "Finding",
    "OpRow",
    "Step",
    "analyze",
    "analyze_trace",
    "merge",
    "rank_rule",
    "rule",
]
