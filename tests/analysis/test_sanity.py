"""`check_report`: the invariants every report must hold, on hand-made reports (each
violation found, named by its path) and on the report of every recorded fixture."""

from __future__ import annotations

import copy
import math

import pytest

from membound.analysis import analyze
from membound.analysis.sanity import check_report
from membound.report.json_report import to_dict
from membound.trace.capture_meta import timeline_in
from support.paths import FIXTURES

SANE = {
    "schema": 1,
    "steps": {
        "count": 2,
        "median_step_ms": 5.0,
        "mean_step_ms": 5.0,
        "unprofiled_median_ms": None,
        "per_step": [
            {
                "index": 0,
                "start_us": -10.0,  # an instant on the trace's clock may be anything finite
                "end_us": 4990.0,
                "wall_ms": 5.0,
                "busy_ms": 3.0,
                "kernel_busy_ms": 2.5,
                "idle_ms": 2.0,
                "idle_by_cause": {"sync": 1.5, "other": 0.5},
                "kernels": 3,
            }
        ],
    },
    "profiler_overhead_fraction": -0.02,  # profiled 2% faster: a relative change
    "gpu_busy_fraction": 0.6,
    "step_shares": {"computing": 0.5, "copying": 0.1, "idle": 0.4},
    "idle_breakdown": {"sync": 1.5},
    "findings": [
        {
            "code": "host-sync",
            "time_lost_ms_per_step": 1.5,
            "share_of_step": 0.3,
            "expected_step_ms_after_fix": 3.5,
            "evidence": {"overlapped_fraction": 0.2, "median_kernel_us": 5.0},
        }
    ],
    "ops": [
        {
            "name": "aten::add",
            "calls": 4,
            "device_ms": 2.0,
            "share_of_gpu_time": 0.8,
            "achieved_bandwidth_fraction": 1.12,  # L2-resident: above the HBM roof
            "arithmetic_intensity": None,
        }
    ],
}


def _with(path: str, value):
    report = copy.deepcopy(SANE)
    node = report
    keys = path.replace("]", "").replace("[", ".").split(".")
    for k in keys[:-1]:
        node = node[int(k)] if k.isdigit() else node[k]
    last = keys[-1]
    node[int(last) if last.isdigit() else last] = value
    return report


def test_the_sane_report_passes():
    assert check_report(SANE) == []


@pytest.mark.parametrize(
    "path, value, problem",
    [
        ("gpu_busy_fraction", 1.2, "a fraction outside 0..1"),
        ("gpu_busy_fraction", -0.1, "a fraction outside 0..1"),
        ("gpu_busy_fraction", math.nan, "not finite"),
        ("ops[0].share_of_gpu_time", 1.008, "a fraction outside 0..1"),
        ("findings[0].share_of_step", 1.29, "a fraction outside 0..1"),
        ("findings[0].evidence.overlapped_fraction", 2.0, "a fraction outside 0..1"),
        ("step_shares.idle", 1.5, "a share outside 0..1"),
        ("steps.median_step_ms", -1.0, "a negative time"),
        ("steps.per_step[0].wall_ms", math.inf, "not finite"),
        ("steps.per_step[0].idle_by_cause.sync", -0.5, "a negative time"),
        ("ops[0].device_ms", -3.0, "a negative time"),
        ("ops[0].achieved_bandwidth_fraction", -0.1, "a negative fraction of a ceiling"),
        ("profiler_overhead_fraction", -1.0, "a relative change of -100% or less"),
        ("ops[0].calls", -1, "a negative count"),
    ],
)
def test_each_violation_is_named_by_its_path(path, value, problem):
    out = check_report(_with(path, value))
    assert any(v.startswith(f"{path}: {problem}") for v in out), out


@pytest.mark.parametrize(
    "path", ["steps.median_step_ms", "findings[0].share_of_step", "ops[0].device_ms"]
)
def test_a_null_where_a_figure_is_required(path):
    # the JSON writer turns NaN into null: a null median is a NaN median
    assert f"{path}: missing or null where a number is required" in check_report(_with(path, None))


def test_figures_that_contradict_each_other():
    r = _with("steps.per_step[0].busy_ms", 6.0)
    assert "steps.per_step[0].busy_ms: more than the step's wall time (6.0)" in check_report(r)
    r = _with("steps.per_step[0].kernel_busy_ms", 3.5)
    assert "steps.per_step[0].kernel_busy_ms: more than busy_ms (3.5)" in check_report(r)
    r = _with("step_shares.idle", 0.9)
    assert any(v.startswith("step_shares: add up to") for v in check_report(r))
    r = copy.deepcopy(SANE)
    r["ops"].append({**r["ops"][0], "name": "aten::mul", "share_of_gpu_time": 0.5})
    assert any(v.startswith("ops: shares of GPU time add up to 1.3") for v in check_report(r))


def test_not_a_report():
    assert check_report([1, 2]) == ["report: not a dict (list)"]
    assert check_report({}) == []  # no section: nothing to contradict


@pytest.mark.parametrize(
    "name", sorted(p.parent.name for p in FIXTURES.glob("*/trace.json.*")), ids=str
)
def test_every_fixture_report_is_sane(name):
    # before the shares were cut to the analysed steps, 11 of these failed (ops' shares of GPU
    # time adding up to 1.004-1.036, aten::mm of h200_healthy_bf16 at 1.0007)
    assert check_report(to_dict(analyze([timeline_in(FIXTURES / name)]))) == []


def test_a_remedy_predicted_to_lose_is_signed_but_its_share_is_bounded():
    """compile's replay (`analysis.compile_whatif`) predicts a loss where fusion does not pay
    its runtime's cost: a negative saving and share of a remedy, and a negative point of
    that replay's curve, are sane; a share below -1 is not, nor a negative time elsewhere."""
    r = copy.deepcopy(SANE)
    r["remedies"] = [{"remedy": "compile", "saving_ms_per_step": -1.1, "share_of_step": -0.1}]
    r["gpu_whatif"] = {"compile": {"removed_ms": [0.0, 1.0], "saving_ms": [-1.1, -0.5]}}
    assert check_report(r) == []
    r["remedies"][0]["share_of_step"] = -1.5
    r["gpu_whatif"]["compile"]["fixed_ms"] = -1.0
    assert check_report(r) == [
        "remedies[0].share_of_step: a share outside -1..1 (-1.5)",
        "gpu_whatif.compile.fixed_ms: a negative time (-1.0)",
    ]


def test_a_predicted_loss_of_the_norm_what_if_is_not_a_negative_time():
    """`norm_whatif` predicts the step's change with membound's norm kernels: a loss is
    negative, and sane (`h200_real_gpt2_run7`: -19.10 and -2.23); a negative time next to
    it is still flagged."""
    r = copy.deepcopy(SANE)
    w = {"swap_norms_ms_per_step": -19.1, "fused_add_norm_ms_per_step": -2.2, "step_ms": -1.0}
    r["findings"][0]["evidence"]["norm_whatif"] = w
    assert check_report(r) == ["findings[0].evidence.norm_whatif.step_ms: a negative time (-1.0)"]


def test_what_ifs_of_timed_kernels_may_predict_a_loss():
    """A what-if of kernels timed in another dtype or layout is signed (the DDPM U-Net's
    GroupNorms make channels_last a loss); a saving elsewhere is not."""
    r = copy.deepcopy(SANE)
    r["gpu_whatif"] = {
        "channels_last_kernels": {"saving_ms": -8.12, "convolutions_saving_ms": 4.18},
        "bf16_kernels": {"saving_ms": -28.5},
    }
    assert check_report(r) == []
    r["gpu_whatif"]["fused_optimizer"] = {"saving_ms": -1.0}
    assert check_report(r) == ["gpu_whatif.fused_optimizer.saving_ms: a negative time (-1.0)"]


def test_every_dtype_what_if_is_signed():
    """sanity writes the what-ifs' names out (it imports no analysis): each of
    `dtype_whatif.WHAT_IFS` is among them."""
    from membound.analysis.dtype_whatif import WHAT_IFS
    from membound.analysis.sanity import SIGNED_IN

    assert set(WHAT_IFS) <= {name for name, key in SIGNED_IN if key == "saving_ms"}
