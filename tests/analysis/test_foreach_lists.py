"""`_foreach_*` calls over a real model's parameters, costed from the parameters they visit.

The profiler leaves a long TensorList's shapes out (`[]`), so every foreach optimizer over
a real model, and `clip_grad_norm_`, was uncosted: the ViT's (timm, 8 workers) and BERT's
(Accelerate) AdamW left 7.1% and 4.3% of GPU op time off the roofline, short of issue 16's
98%. The parameters are known from autograd (AccumulateGrad), and each multi_tensor_apply
block visits 65536 elements of one tensor: a call whose blocks are a group's chunks visits
that group (analysis/optimizer_ops.py `cost_foreach_lists`). Traces recorded on the H200 (2026-12-04).
"""

from __future__ import annotations

import pytest

from membound.analysis import analyze
from membound.device.ceilings import Ceilings
from membound.trace.capture_meta import timeline_in
from support.paths import FIXTURES


@pytest.fixture(scope="module")
def h200():
    return Ceilings.load(FIXTURES / "h200_ceilings.json")


def _analysis(name, ceilings):
    return analyze([timeline_in(FIXTURES / f"h200_real_{name}")], ceilings)


def _rows(a):
    return {r.name: r for r in a.ops if r.name.startswith("aten::_foreach")}


#: ViT-B/16's parameters (the script's timm model: 152 tensors, fp32)
VIT_PARAMS = 86_567_656


def test_the_vits_adamw_is_costed_pass_by_pass(h200):
    """torch's foreach AdamW over one group, all 152 parameters (1421 blocks a call): each
    op moves its passes over them in fp32, by hand: lerp (exp_avg, grad -> exp_avg) 3, the
    square's addcmul 3 (the gradient read once, see below), mul, sqrt, div and add 2, the
    update's addcdiv 4. Every one is memory-bound and under its roof; nothing is left."""
    a = _analysis("vit_timm_oos1", h200)
    assert a.ops_costed_fraction == pytest.approx(1.0, abs=1e-6)  # was 0.9289
    rows = _rows(a)
    passes = {
        "aten::_foreach_lerp_": 3, "aten::_foreach_addcmul_": 3, "aten::_foreach_mul_": 2,
        "aten::_foreach_sqrt": 2, "aten::_foreach_div_": 2, "aten::_foreach_add_": 2,
        "aten::_foreach_addcdiv_": 4,
    }  # fmt: skip
    assert set(rows) == set(passes)
    steps = len(a.steps)
    for name, n in passes.items():
        r = rows[name]
        # _foreach_add_ and _foreach_mul_ also run on the CPU's step counters and twice a step
        per_step = {"aten::_foreach_mul_": 2}.get(name, 1)
        assert r.exact_cost and r.bound == "memory", name
        assert r.bytes / steps == pytest.approx(VIT_PARAMS * 4 * n * per_step, rel=1e-9), name
        assert 0.7 < r.fraction_of_attainable < 1.0, name


def test_the_square_reads_the_gradient_once(h200):
    """Adam's `exp_avg_sq += (1 - beta2) * grad * grad` is `_foreach_addcmul_(exp_avg_sqs,
    grads, grads)`: counted as two lists it ran at 116% of the HBM roof on the ViT and on
    BERT, against 75-89% for the optimizer's other ops; one read of the factors gives 87%."""
    for name in ("vit_timm_oos1", "bert_finetune_oos1"):
        r = _rows(_analysis(name, h200))["aten::_foreach_addcmul_"]
        assert 0.8 < r.fraction_of_attainable < 0.95, name


def test_berts_two_groups_are_told_apart_by_their_chunks(h200):
    """HF's decay and no-decay groups: the matrices (77 tensors, 1671 blocks) and the
    vectors (124 tensors of 768 or fewer elements, one block each). A count of one block a
    tensor would fit any 124 small tensors, so the vectors' calls are taken for the vectors
    because the same ops ran on the matrices; together they are the whole model."""
    a = _analysis("bert_finetune_oos1", h200)
    assert a.ops_costed_fraction > 0.9999  # was 0.9574
    rows = _rows(a)
    assert all(r.exact_cost for r in rows.values())
    lerp = rows["aten::_foreach_lerp_"]
    params = 109_483_778  # BERT-base with its classifier: the script's parameters
    assert lerp.calls == 2 * len(a.steps)
    assert lerp.bytes / len(a.steps) == pytest.approx(params * 4 * 3, rel=1e-9)


def test_a_count_that_pins_only_how_many_tensors_stays_uncosted(h200):
    """The HF Llama's fused AdamW increments its step counters with `_foreach_add_`, 58 and
    17 of them, one block each; its no-decay group is 17 vectors of 2048 elements, also one
    block each. No matrices call of that op says it runs per group, so it stays uncosted
    (taken for the vectors it would be 2048 times its bytes). The clipping's norm and scale
    visit all 75 parameters (2585 blocks) and are costed."""
    a = _analysis("hf_trainer_llama", h200)
    rows = _rows(a)
    assert not rows["aten::_foreach_add_"].exact_cost
    assert rows["aten::_foreach_norm"].exact_cost and rows["aten::_foreach_mul_"].exact_cost
    assert a.ops_costed_fraction == pytest.approx(0.9998, abs=1e-4)


def test_groups_by_module_match_no_rule_and_stay_uncosted(h200):
    """torchvision's segmentation reference gives the backbone, the classifier and the
    auxiliary classifier a group each (475, 262 and 40 blocks): no group by shape has those
    chunks, so SGD's foreach ops stay uncosted rather than guessed (98.5% costed)."""
    a = _analysis("segmentation_tv_oos1", h200)
    rows = _rows(a)
    assert not any(r.exact_cost for r in rows.values())
    assert a.ops_costed_fraction == pytest.approx(0.9853, abs=1e-4)
