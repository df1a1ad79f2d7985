"""The rule registry and what every rule shares: ranking, the noise floor, user rules."""

from __future__ import annotations

import pytest

from membound.analysis.findings import RULES, Finding, rule
from support.analysis import run


def test_datasheet_ceilings_are_used_and_said():
    a = run("synthetic_input_pipeline", None)  # NVIDIA H200: datasheet, nothing cached
    assert a.ceilings_source == "datasheet"
    assert any("datasheet" in n for n in a.notes)


def test_healthy_run_has_no_finding_above_ten_percent(ceilings):
    a = run("synthetic_healthy", ceilings)
    assert all(f.share_of_step < 0.10 for f in a.findings)
    assert a.gpu_busy_fraction > 0.99
    assert a.ops[0].bound == "compute" and a.ops[0].fraction_of_attainable == pytest.approx(0.9)


def test_findings_are_ranked(ceilings):
    a = run("synthetic_input_pipeline", ceilings)
    lost = [f.time_lost_ms_per_step for f in a.findings]
    assert lost == sorted(lost, reverse=True)


def test_user_rule_registers_and_runs(ceilings):
    @rule("test-always")
    def always(ctx):
        ms = ctx.mean_step_ms * 0.5
        return [
            Finding("test-always", "planted", ms, ctx.share(ms), {"steps": ctx.n_steps}, "none")
        ]

    try:
        a = run("synthetic_input_pipeline", ceilings)
        top = a.findings[0]
        assert top.code == "test-always" and top.share_of_step == pytest.approx(0.5)
        with pytest.raises(ValueError, match="already registered"):
            rule("test-always")(lambda ctx: [])
    finally:
        RULES.pop("test-always", None)


def test_every_builtin_rule_documents_its_method():
    import membound.analysis.rules  # noqa: F401

    expected = {
        "pageable-copy",
        "blocking-copy",
        "input-starved",
        "host-sync",
        "launch-bound",
        "memory-bound-op",
        "unfused-chain",
        "fp32-storage",
        "fp32-matmul",
    }
    assert expected <= set(RULES)
    for code in expected:
        assert "per step" in (RULES[code].__doc__ or ""), code
