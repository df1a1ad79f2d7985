"""Activation checkpointing's recompute (forward ops inside the backward) is said in a note,
with its calls and GPU time (`analysis.recompute`)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from membound.analysis import recompute
from membound.analysis.op_calls import OpCall
from support import truth


def _call(name: str, backward: bool, device_us: float = 10.0) -> OpCall:
    return OpCall(0, name, 1, 0.0, 0.0, device_us, 1, 0.0, 0.0, None, "x", True,
                  backward=backward)  # fmt: skip


def _ctx(calls, steps: int = 1):
    return SimpleNamespace(calls=calls, per_op_step=lambda total: total / steps)


def _layer(backward_again: bool) -> list[OpCall]:
    """One transformer block's forward and backward calls; with `backward_again` the
    backward runs the forward's ops again first, as a checkpointed block does."""
    fwd = ["aten::native_layer_norm", "aten::addmm", "aten::gelu", "aten::addmm"]
    out = [_call(n, False) for n in fwd]
    if backward_again:
        out += [_call(n, True, 20.0) for n in fwd]
    out += [_call(n, True) for n in ("aten::mm", "aten::mm", "aten::sum", "aten::gelu_backward",
                                     "aten::mm", "aten::native_layer_norm_backward")]  # fmt: skip
    return out


def test_a_checkpointed_model_gets_its_recompute():
    calls = [c for _ in range(4) for c in _layer(True)]
    r = recompute.of(_ctx(calls, steps=2))
    assert r["calls_per_step"] == 8.0  # 16 forward calls again over 2 steps
    assert r["gpu_ms_per_step"] == pytest.approx(16 * 20.0 / 1e3 / 2)
    assert r["ops"]["aten::addmm"] == (8, 8)
    text = recompute.note(r)
    assert text.startswith("the backward runs 8 forward op calls a step again")
    assert "8 addmm of the forward's 8" in text and "gradient_checkpointing=False" in text


@pytest.mark.parametrize("why", ["none", "few", "custom"])
def test_no_note_without_a_recompute_to_speak_of(why):
    if why == "none":  # an ordinary backward: mm, sum and the *_backward ops only
        calls = [c for _ in range(8) for c in _layer(False)]
    elif why == "few":  # recomputed, but fewer than MIN_CALLS a step
        calls = [c for _ in range(1) for c in _layer(True)]
    else:  # a custom backward calling one relu among many forward relus
        calls = [_call("aten::relu", False) for _ in range(40)] + [_call("aten::relu", True)] * 9
    assert recompute.of(_ctx(calls)) is None


def test_the_wav2vec2_fine_tunes_recompute_is_in_its_report():
    """HF Trainer with gradient_checkpointing=True on the H100: the backward ran 216 of the
    forward's 222 addmm again, 72 of its 78 LayerNorms and all 36 attention forwards."""
    notes = truth.report("h100_real_wav2vec2_ctc_truth1")["notes"]
    (text,) = [n for n in notes if n.startswith("the backward runs")]
    assert "the backward runs 120 forward op calls a step again" in text
    assert "216 addmm of the forward's 222" in text
    assert "72 native_layer_norm of the forward's 78" in text
    assert "36 _scaled_dot_product_cudnn_attention of the forward's 36" in text
    assert "2.34 ms/step of GPU time" in text


@pytest.mark.parametrize(
    "name", ["h100_real_bert_finetune_truth1", "h100_real_t5_seq2seq_truth3",
             "h100_real_vit_timm_truth5", "h100_real_lstm_lm_truth1"],
)  # fmt: skip
def test_models_without_checkpointing_get_no_note(name):
    notes = truth.report(name)["notes"]
    assert not [n for n in notes if n.startswith("the backward runs")]
