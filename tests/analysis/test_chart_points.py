"""Roofline chart points label compiled kernels by the ops they fused (issue 16)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from membound.analysis.roofline import chart_points, point_label


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("aten::mm", "mm"),
        ("triton_red_fused_native_layer_norm_0", "fused native_layer_norm (red)"),
        ("triton_poi_fused__to_copy_add_mul_12", "fused _to_copy+add+mul (poi)"),
        ("triton_per_fused_foo_bar_1", "triton_per_fused_foo_bar_1"),  # nothing readable
        ("my_kernel", "my_kernel"),
    ],
)
def test_point_label(name, label):
    assert point_label(name) == label


def test_a_compiled_kernel_is_a_point_like_the_others():
    rows = [
        SimpleNamespace(name="triton_poi_fused_add_0", arithmetic_intensity=0.1, device_ms=2.0,
                        flops=1e9),
        SimpleNamespace(name="triton_poi_fused_zeros_1", arithmetic_intensity=0.0, device_ms=1.0,
                        flops=0.0),  # bytes-only: no FLOP/s to place on a log axis
    ]  # fmt: skip
    pts = chart_points(rows)
    assert [p["label"] for p in pts] == ["fused add (poi)"]
    assert pts[0]["achieved_flops"] == pytest.approx(1e9 / 2e-3)
