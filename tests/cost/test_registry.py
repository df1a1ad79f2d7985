"""Registry behaviour: names, duplicates, user formulas, unknown-op fallback."""

from __future__ import annotations

import pytest
import torch

import membound
from membound.cost import (
    Cost,
    CostCounter,
    cost_of,
    normalize_name,
    register,
    registered,
    unregister,
)


@pytest.mark.parametrize(
    "name,expected",
    [
        ("aten::add", "aten::add"),
        ("aten.add", "aten::add"),
        ("add", "aten::add"),
        ("aten.add.Tensor", "aten::add"),
        ("aten::add.Tensor", "aten::add"),
        ("mylib::fused_op.default", "mylib::fused_op"),
        ("mylib.fused_op.default", "mylib::fused_op"),
    ],
)
def test_normalize_name(name, expected):
    assert normalize_name(name) == expected


def test_duplicate_registration_refused():
    assert "aten::mm" in registered()
    with pytest.raises(ValueError, match="already registered"):
        register("aten.mm", family="matmul")(lambda call: Cost(0, 0, None))


def test_user_formula_and_override():
    try:

        @register("mylib::scale", family="custom")
        def _scale(call):
            x = call.tensor(0)
            return Cost(x.numel, 2 * x.nbytes, "fp32_vector")

        assert "mylib::scale" in registered()
        got = cost_of("mylib::scale", [[10, 10]], ["c10::Half"])
        assert got == Cost(100, 400, "fp32_vector", True, "custom")

        with pytest.raises(ValueError):
            register("mylib::scale", family="custom")(_scale)

        @register("mylib.scale.default", family="custom", replace=True)
        def _scale2(call):
            return Cost(1, 1, None)

        assert cost_of("mylib::scale", [[10, 10]], ["float"]).flops == 1
    finally:
        unregister("mylib::scale")
    assert "mylib::scale" not in registered()


def test_override_builtin_then_restore():
    from membound.cost.formulas import matmul

    try:
        register("aten::mm", family="matmul", replace=True)(lambda call: Cost(7, 7, "fp32"))
        assert cost_of("aten::mm", [[2, 3], [3, 4]], ["float", "float"]).flops == 7
    finally:
        register("aten::mm", "aten::bmm", "aten::matmul", family="matmul", replace=True)(matmul._mm)
    assert cost_of("aten::mm", [[2, 3], [3, 4]], ["float", "float"]).flops == 2 * 2 * 3 * 4


def test_unknown_op_post_hoc_is_marked_inexact():
    got = cost_of("aten::some_new_op", [[8, 4], [4], []], ["float", "c10::Half", "Scalar"])
    # inputs 8*4*4 + 4*2, one output as large as the largest input (8*4*4)
    assert got == Cost(0.0, 128 + 8 + 128, None, False, "unknown")


def test_unknown_op_live_uses_real_outputs():
    lib = torch.library.Library("membound_test", "FRAGMENT")  # noqa: TOR901
    lib.define("widen(Tensor x) -> Tensor")
    lib.impl("widen", lambda x: torch.cat([x, x, x]), "CompositeExplicitAutograd")
    x = torch.zeros(4, 5)
    with CostCounter() as c:
        torch.ops.membound_test.widen(x)
    rec = c.records[0]
    assert rec.name == "membound_test::widen"
    assert rec.cost == Cost(0.0, 80 + 240, None, False, "unknown")
    assert c.total.exact is False


def test_cost_intensity_and_sum():
    a = Cost(100.0, 50.0, "bf16")
    assert a.intensity == 2.0
    assert Cost(0.0, 0.0, None).intensity == 0.0
    assert (a + Cost(10.0, 10.0, "bf16")) == Cost(110.0, 60.0, "bf16", True, "")


def test_a_sum_knows_its_reads_only_when_every_part_does():
    known = Cost(1.0, 30.0, "fp32_vector", read_bytes=20.0)
    assert (known + Cost(1.0, 10.0, "fp32_vector", read_bytes=0.0)).read_bytes == 20.0
    assert (known + Cost(1.0, 10.0, "fp32_vector")).read_bytes is None
    assert (Cost(1.0, 10.0, "fp32_vector") + known).read_bytes is None


def test_simple_counts_the_inputs_as_read_and_the_outputs_as_written():
    """`simple`'s reads are the call's distinct tensor inputs (a broadcast one at its stored
    extent), the rest of its bytes the outputs: `out = a + b` on two (64, 32) fp32 tensors
    reads 2 of its 3 buffers; with a (32,) bias broadcast, 64 x 32 + 32 elements."""
    from membound.cost.call import OpCall, TensorMeta
    from membound.cost.registry import simple

    a, b = TensorMeta((64, 32)), TensorMeta((64, 32))
    got = simple(OpCall("aten::add", [a, b, 1]), 2048, [TensorMeta((64, 32))], "fp32_vector")
    assert (got.bytes, got.read_bytes) == (3 * 2048 * 4, 2 * 2048 * 4)
    bias = TensorMeta((64, 32), "float32", extent=32)  # an expanded (32,) vector: stride 0
    got = simple(OpCall("aten::add", [a, bias, 1]), 2048, [TensorMeta((64, 32))], None)
    assert (got.bytes, got.read_bytes) == ((2048 + 32 + 2048) * 4, (2048 + 32) * 4)
    # through the registry, from a trace's recorded shapes: a bf16 add of two (8, 16) tensors
    got = cost_of("aten::add", [[8, 16], [8, 16], []], ["c10::BFloat16"] * 2 + ["Scalar"])
    assert (got.bytes, got.read_bytes) == (3 * 128 * 2, 2 * 128 * 2)


def test_inductor_kernels_and_unknown_ops_leave_the_split_unknown():
    """A Triton kernel's arguments do not say which it writes (an in-place buffer is both),
    nor does an unknown op's guess: their HBM roof is the one for an unknown mix."""
    kernel = cost_of("triton_poi_fused_add_mul_0", [[64, 8], [64, 8], [64, 8], []],
                     ["float"] * 3 + ["Scalar"], ["", "", "", "512"])  # fmt: skip
    assert kernel.exact and kernel.bytes == 3 * 512 * 4 and kernel.read_bytes is None
    assert cost_of("aten::not_an_op", [[4, 4]], ["float"]).read_bytes is None


def test_package_exports_cost():
    assert membound.Cost is Cost
    assert membound.CostCounter is CostCounter


def test_unreadable_arguments_degrade_to_fallback(monkeypatch):
    from membound.cost import registry

    monkeypatch.setattr(registry, "_WARNED", set())
    with pytest.warns(RuntimeWarning, match="aten::mm"):
        got = cost_of("aten::mm", [[], []], ["Scalar", "Scalar"], ["1", "2"])
    assert got.exact is False and got.family == "unknown"
