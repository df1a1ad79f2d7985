"""Which CPU op a kernel is charged to (`analysis.ops._owners`): the innermost op with a
cost, walking outwards from the op that launched it, except to a composite whose own
children are costed. Hand-built traces: an attention call (its formula counts the whole
attention) over a costed `bmm` and an uncosted child op."""

from __future__ import annotations

from membound.analysis import analyze
from support.tracebuilder import TraceBuilder
from support.tracebuilder import test_ceilings as hand_ceilings

SDPA_DIMS = [[2, 4, 128, 64], [2, 4, 128, 64], [2, 4, 128, 64]]


def _trace(tmp_path, with_costed_child: bool):
    b = TraceBuilder()
    for s in range(2):
        o = s * 1000.0
        b.step(s, o, 1000.0)
        b.op("aten::scaled_dot_product_attention", o + 10, 200, SDPA_DIMS)
        if with_costed_child:
            b.op("aten::bmm", o + 20, 30, [[8, 128, 64], [8, 64, 128]])
            b.launch("sm90_xmma_gemm_f32f32_tf32f32_f32_nn", o + 25, o + 300, 40.0)
        b.op("aten::made_up_op", o + 80, 30, [[2, 4, 128, 128]])
        b.launch("made_up_kernel", o + 85, o + 400, 60.0)
    return analyze([b.write(tmp_path / "t.json")], hand_ceilings())


def _device_ms(analysis) -> dict[str, float]:
    return {r.name: r.device_ms for r in analysis.ops}


def test_an_uncosted_childs_kernel_is_not_set_against_a_composite_with_costed_children(
    tmp_path,
):
    # before: made_up_kernel went to the attention call, whose formula then counted the
    # whole attention against 60 us of one uncosted kernel (T5's SDPA at 373% of its roof)
    ops = _device_ms(_trace(tmp_path, with_costed_child=True))
    assert ops["aten::made_up_op"] > 0
    assert ops.get("aten::scaled_dot_product_attention", 0.0) == 0.0
    assert ops["aten::bmm"] > 0


def test_a_composite_without_costed_children_still_takes_its_childs_kernels(tmp_path):
    ops = _device_ms(_trace(tmp_path, with_costed_child=False))
    assert ops["aten::scaled_dot_product_attention"] > 0
    assert "aten::made_up_op" not in ops
