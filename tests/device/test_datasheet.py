"""Datasheet lookup: driver spellings of one GPU map to the right variant, others to None."""

from __future__ import annotations

import pytest

from membound.device import ceilings_for_name, datasheet


@pytest.mark.parametrize(
    ("reported", "canonical"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("H100 SXM", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM 80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100 SXM 40GB"),
        ("NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB"),
        ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("Tesla T4", "T4"),
    ],
)
def test_lookup_tolerates_driver_spellings(reported, canonical):
    spec = datasheet.lookup(reported)
    assert spec is not None and spec.name == canonical


@pytest.mark.parametrize(
    "name", ["NVIDIA GeForce RTX 2060", "Intel(R) Xeon(R) Processor", "", "L4040"]
)
def test_unknown_devices_have_no_datasheet(name):
    assert datasheet.lookup(name) is None
    assert ceilings_for_name(name) is None


def test_figures_are_dense_peaks_in_si_units():
    h200 = datasheet.figures("NVIDIA H200")
    assert h200["memory_bandwidth"] == pytest.approx(4.8e12)
    assert h200["bf16"] == pytest.approx(989.4e12)
    assert h200["tf32"] == pytest.approx(h200["bf16"] / 2)
    assert h200["fp8"] == pytest.approx(2 * h200["bf16"], rel=1e-3)
    # every spec's tensor-core rate is at least its vector rate
    for spec in datasheet.SPECS:
        assert spec.flops["bf16"] >= spec.flops["fp32"] > 0, spec.name


def test_ceilings_for_name_falls_back_to_datasheet():
    c = ceilings_for_name("NVIDIA H100 80GB HBM3")
    assert c.source == "datasheet"
    assert c.memory_bandwidth == pytest.approx(3.35e12)
    assert c.ridge("bf16") == pytest.approx(989.4e12 / 3.35e12)
