"""The backward running the forward again: activation (gradient) checkpointing's recompute.

`torch.utils.checkpoint` (and `model.gradient_checkpointing_enable()` in transformers) keeps
no activations of a checkpointed block; the backward runs the block's forward once more to
get them back. In a trace that recompute is forward ops inside a backward node
(`OpCall.backward`): a LayerNorm's `native_layer_norm`, a linear layer's `addmm`, an
attention's forward kernel, which an ordinary backward never calls (their gradients are
`native_layer_norm_backward`, `mm`, the attention's `_backward`). Only ops of that kind
count (`FORWARD_ONLY`): `mm`, `bmm`, `add` and the like serve both passes.

On the H100 (2026-12-06, `tests/fixtures/h100_real_wav2vec2_ctc_truth1`, HF Trainer with
`gradient_checkpointing=True`) the backward ran 216 of the 222 `addmm`, all 36 attention
forwards and 72 of the 78 LayerNorms again; turning checkpointing off saved 96.6 ms of a
~300 ms step (baselines 33% apart). What it saves is the recompute's GPU time and its host
time; the note gives the first and the calls, and says the rest is host time. It is a note,
not a finding: one noisy measurement does not make a prediction, and turning it off trades
memory for the time, which a trace cannot judge.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from membound.analysis.op_calls import call_column

#: forward ops an ordinary backward does not call (their gradients have ops of their own)
FORWARD_ONLY = frozenset(
    f"aten::{n}"
    for n in (
        "native_layer_norm layer_norm native_group_norm group_norm rms_norm _fused_rms_norm "
        "native_batch_norm cudnn_batch_norm _native_batch_norm_legit "
        "_batch_norm_with_update _batch_norm_no_update addmm linear convolution _convolution "
        "cudnn_convolution cudnn_convolution_transpose conv2d conv1d conv3d "
        "_scaled_dot_product_flash_attention _scaled_dot_product_efficient_attention "
        "_scaled_dot_product_cudnn_attention _flash_attention_forward "
        "_efficient_attention_forward gelu silu relu _softmax _log_softmax native_dropout "
        "embedding"
    ).split()
)

#: the recompute is said where the backward ran at least this share of those forward calls
#: again (a custom backward calling one `relu` is not checkpointing)
MIN_SHARE = 0.25
#: and at least this many a step
MIN_CALLS = 8


def of(ctx) -> dict | None:
    """The backward's recompute per step: calls, GPU ms, the top ops (recomputed of all
    their calls); None where there is none to speak of."""
    calls = ctx.calls
    if not len(calls):
        return None
    names = call_column(calls, "name")
    backward = call_column(calls, "backward").astype(bool)
    fwd = np.fromiter((n in FORWARD_ONLY for n in names.tolist()), dtype=bool, count=len(names))
    again = fwd & backward
    n_again, n_fwd = int(again.sum()), int(fwd.sum())
    if not n_again or n_again < MIN_SHARE * (n_fwd - n_again):
        return None
    per_step = ctx.per_op_step(n_again)
    if per_step < MIN_CALLS:
        return None
    device_ms = float(call_column(calls, "device_us")[again].sum()) / 1e3
    every = Counter(names[fwd].tolist())
    top = Counter(names[again].tolist()).most_common(3)
    return {
        "calls_per_step": per_step,
        "gpu_ms_per_step": ctx.per_op_step(device_ms),
        # op -> (calls the backward ran again, the forward's own calls), over the ops steps
        "ops": {n: (k, every[n] - k) for n, k in top},
    }


def note(r: dict) -> str:
    ops = ", ".join(f"{k} {name.removeprefix('aten::')} of the forward's {n}" for name, (k, n)
                    in r["ops"].items())  # fmt: skip
    return (
        f"the backward runs {r['calls_per_step']:.0f} forward op calls a step again "
        f"(activation checkpointing's recompute; over the recorded steps {ops}): "
        f"{r['gpu_ms_per_step']:.2f} ms/step of GPU time, and the host's time to issue them, "
        "most of it where the host paces the step; where memory allows, checkpointing fewer "
        "blocks (or none: gradient_checkpointing=False) saves both"
    )
