"""Shortcuts the rule tests share: analyse one fixture, index findings by code."""

from __future__ import annotations

from membound.analysis import analyze
from membound.cost.trace_args import cost_of
from membound.trace.capture_meta import timeline_in
from support import tracebuilder
from support.paths import FIXTURES

#: the costs of the planted memory block's ops (`tracebuilder.planted_memory_block`: an fp32
#: add and a LayerNorm on 8192 x 1024), as the cost model reads them from the trace
ADD = cost_of(
    "aten::add", [[8192, 1024], [8192, 1024], []], ["float", "float", "Scalar"], ["", "", "1"]
)
LN = cost_of(
    "aten::native_layer_norm",
    tracebuilder.LN_DIMS,
    ["float", "float", "float", "Scalar"],
    ["", "[1024]", "", "", "1e-05"],
)


def run(name: str, ceilings):
    """The analysis of fixture `name` (tests/fixtures/<name>/trace.json.gz)."""
    return analyze([timeline_in(FIXTURES / name)], ceilings)


def by_code(analysis) -> dict:
    return {f.code: f for f in analysis.findings}


def run_with_context(name: str, ceilings, *, rule: str = "launch-bound") -> tuple:
    """(the analysis of fixture `name`, the context its rules saw): the context caught as
    rule `rule` is called (every rule gets the same one)."""
    from membound.analysis import findings

    seen = {}
    wrapped = findings.RULES[rule]

    def catch(ctx):
        seen["ctx"] = ctx
        return wrapped(ctx)

    findings.RULES[rule] = catch
    try:
        a = run(name, ceilings)
    finally:
        findings.RULES[rule] = wrapped
    return a, seen["ctx"]
