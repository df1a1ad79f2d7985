"""Findings and the registries of rules that produce them.

A rule is a function `(AnalysedTrace) -> Iterable[Finding]`, registered under a stable
code with `@rule("code")`; a cross-rank rule, `(RankContext) -> Iterable[Finding]` with
`@rank_rule("code")`, runs on the merge of one trace per rank and replaces any single-rank
finding of its code. Built-in rules live one family per module in `membound.analysis.rules`
(importing that package registers them; `analysis.analyze` does); users add their own the
same way (before calling `analyze`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Finding:
    """One bottleneck, with the time it costs, the numbers behind it, and the fix."""

    code: str
    title: str
    time_lost_ms_per_step: float
    share_of_step: float  # 0..1, time lost / mean step wall time
    evidence: dict[str, Any]
    fix: str
    spans: list[tuple[float, float]] = field(default_factory=list)  # µs on the trace clock
    #: the unprofiled step (else the trace's mean step) minus `time_lost_ms_per_step`
    expected_step_ms_after_fix: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "title": self.title,
            "time_lost_ms_per_step": round(self.time_lost_ms_per_step, 4),
            "expected_step_ms_after_fix": None
            if self.expected_step_ms_after_fix is None
            else round(self.expected_step_ms_after_fix, 4),
            "share_of_step": round(self.share_of_step, 4),
            "evidence": self.evidence,
            "fix": self.fix,
            "doc": self.doc,
        }

    @property
    def doc(self) -> str | None:
        """The page that explains this finding (built-in codes: docs/findings/<code>.md)."""
        return f"docs/findings/{self.code}.md" if self.code in DOCUMENTED else None


#: the built-in codes, each with its page under docs/findings/ (tests check every one exists)
DOCUMENTED = frozenset(
    {"pageable-copy", "blocking-copy", "input-starved", "host-sync", "launch-bound",
     "host-bound", "data-parallel-one-gpu",
     "memory-bound-op", "unfused-chain", "fp32-storage", "fp32-matmul", "tf32-matmul",
     "exposed-communication", "straggler-rank"}
)  # fmt: skip

Rule = Callable[[Any], Iterable[Finding]]
RULES: dict[str, Rule] = {}
RANK_RULES: dict[str, Rule] = {}


def _registrar(registry: dict[str, Rule], code: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        if code in registry and registry[code] is not fn:
            raise ValueError(f"a rule for finding code {code!r} is already registered")
        registry[code] = fn
        fn.code = code  # type: ignore[attr-defined]
        return fn

    return register


def rule(code: str) -> Callable[[Rule], Rule]:
    """Register a rule under `code`; codes are unique (re-registering one is a bug)."""
    return _registrar(RULES, code)


def rank_rule(code: str) -> Callable[[Rule], Rule]:
    """Register a cross-rank rule under `code` (see the module docstring)."""
    return _registrar(RANK_RULES, code)


#: findings smaller than this share of a step are noise, not reported
MIN_SHARE = 0.01


def ranked(findings: Iterable[Finding]) -> list[Finding]:
    """Largest saving first."""
    return sorted(findings, key=lambda f: f.time_lost_ms_per_step, reverse=True)


def capped(f: Finding) -> Finding:
    """No fix saves more than the whole step: a saving above it (a rule's estimate from a
    profiled step longer than the unprofiled one) is cut to the step, and the estimate is
    kept in the evidence (`estimated_ms_per_step`)."""
    if f.share_of_step > 1.0:
        f.evidence = {**f.evidence, "estimated_ms_per_step": f.time_lost_ms_per_step}
        f.time_lost_ms_per_step /= f.share_of_step
        f.share_of_step = 1.0
    return f


def run_rules(trace: Any, codes: Iterable[str] | None = None) -> list[Finding]:
    """Run every registered rule (or `codes`), drop noise, rank by time lost."""
    out: list[Finding] = []
    for code in codes or list(RULES):
        for f in RULES[code](trace) or ():
            if not math.isfinite(f.time_lost_ms_per_step) or not math.isfinite(f.share_of_step):
                continue  # a rule fed figures it cannot use predicts nothing
            capped(f)
            if f.time_lost_ms_per_step > 0 and f.share_of_step >= MIN_SHARE:
                if f.expected_step_ms_after_fix is None:
                    f.expected_step_ms_after_fix = trace.expected_after(f.time_lost_ms_per_step)
                out.append(f)
    return ranked(out)


def run_rank_rules(ctx: Any, findings: Iterable[Finding]) -> list[Finding]:
    """The merged ranks' findings: `findings` (pooled from the ranks) less the codes a
    cross-rank rule owns, plus what those rules find, ranked."""
    out = [f for f in findings if f.code not in RANK_RULES]
    for fn in RANK_RULES.values():
        out.extend(fn(ctx) or ())
    return ranked(out)
