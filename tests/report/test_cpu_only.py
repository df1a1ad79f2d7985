"""CPU-only runs say what applies (issue 18: the HTML said 'No finding above 1% of a step' with
no step times, the JSON booked every CPU step as 100% `other` idle, the CPU roofline headline
used a bf16 ridge of 0.037 FLOP/byte, cached figures did not say so)."""

from __future__ import annotations

import io

from rich.console import Console

from membound.analysis import analyze
from membound.device.ceilings import Ceilings
from membound.report import html, json_report
from membound.report.ceilings import render, ridge_key
from membound.trace.capture_meta import timeline_in
from support.paths import FIXTURES


def test_cpu_only_json_and_html():
    a = analyze([timeline_in(FIXTURES / "cpu_only")])
    d = json_report.to_dict(a)
    assert d["gpu_busy_fraction"] is None and d["step_shares"] is None
    for s in d["steps"]["per_step"]:
        assert s["wall_ms"] > 0 and s["busy_ms"] is None and s["idle_by_cause"] == {}
    page = html.render(a)
    assert "Steps (host time)" in page and "No GPU: no finding applies" in page
    assert f"{a.steps[0].wall_ms:.3f}" in page


def test_cpu_ridge_uses_the_best_measured_rate_and_cached_says_so():
    cpu = Ceilings(device="cpu", name="cpu", memory_bandwidth=25e9,
                   flops={"bf16": 0.94e9, "fp32": 127e9, "fp32_vector": 60e9})  # fmt: skip
    assert ridge_key(cpu) == "fp32"
    buf = io.StringIO()
    render(cpu, Console(file=buf, width=160, color_system=None), cached=True)
    text = buf.getvalue()
    assert "ridge point (matmul fp32 (TF32 off)): 5.08 FLOP/byte" in text
    assert "cached: --refresh measures again" in " ".join(text.split())  # the title may wrap
    gpu = Ceilings(
        device="cuda", name="g", memory_bandwidth=4e12, flops={"bf16": 7e14, "fp32": 5e13}
    )
    assert ridge_key(gpu) == "bf16"
