"""bf16 autocast's added host work in the GPU what-if (analysis/gpu_whatif.py
`autocast_host_ms`, `autocast_cap`) and the bf16 remedy read through it (analysis/remedies.py)."""

from __future__ import annotations

import pytest

from membound.analysis import gpu_whatif
from membound.analysis.remedies import combined


def test_autocast_caps_bf16_at_the_curves_end_less_its_host_work():
    curve = {"removed_ms": [0.0, 10.0, 20.0], "saving_ms": [0.0, 9.0, 12.0]}
    assert gpu_whatif.autocast_cap(curve) is None  # the launch's host time was not measured
    curve["autocast_host_ms"] = gpu_whatif.autocast_host_ms(1000, 10.0)
    assert curve["autocast_host_ms"] == pytest.approx(gpu_whatif.AUTOCAST_LAUNCHES_PER_KERNEL * 10)
    assert gpu_whatif.autocast_cap(curve) == pytest.approx(12.0 - curve["autocast_host_ms"])
    curve["autocast_host_ms"] = 50.0
    assert gpu_whatif.autocast_cap(curve) == 0.0  # never a negative saving of GPU work
    assert gpu_whatif.autocast_host_ms(1000, None) is None


class _F:
    def __init__(self, code, ms, kernel):
        self.code, self.time_lost_ms_per_step = code, ms
        self.evidence = {"kernel_ms_per_step": kernel}


def test_the_bf16_remedy_pays_autocasts_host_work_and_tf32_does_not():
    """A host-paced loop: removing kernel time saves at most 12 ms (the curve's end). TF32
    and bf16 remove the same 20 ms of matmul time; bf16 also pays 4 ms of host work."""
    curve = {"removed_ms": [0.0, 10.0, 20.0], "saving_ms": [0.0, 9.0, 12.0]}
    curve["autocast_host_ms"] = 4.0
    findings = [_F("fp32-matmul", 12.0, 20.0)]
    assert combined(findings, ["tf32"], 80.0, curve) == pytest.approx(12.0)
    assert combined(findings, ["bf16"], 80.0, curve) == pytest.approx(8.0)
    del curve["autocast_host_ms"]  # not measured: as before
    assert combined(findings, ["bf16"], 80.0, curve) == pytest.approx(12.0)


def test_a_measured_factor_replaces_the_constant():
    """Where the machine measured autocast's host work per kernel, that figure prices it."""
    assert gpu_whatif.autocast_host_ms(1000, 10.0, 0.9) == pytest.approx(9.0)
    assert gpu_whatif.autocast_host_ms(1000, 10.0, None) == pytest.approx(
        gpu_whatif.AUTOCAST_LAUNCHES_PER_KERNEL * 10
    )
    assert gpu_whatif.autocast_host_ms(1000, None, 0.9) is None


def test_the_note_says_where_the_factor_was_measured():
    curve = {"kernel_ms_per_step": 20.0, "removed_ms": [0.0, 20.0], "saving_ms": [0.0, 12.0],
             "autocast_host_ms": 4.0}  # fmt: skip
    assert "as measured here" not in gpu_whatif.note(curve)
    curve["autocast_launches_per_kernel_measured"] = 0.85
    line = gpu_whatif.note(curve)
    assert "adds about 4.00 ms/step of host work" in line
    assert "0.85 launches' host time a kernel as measured here" in line
