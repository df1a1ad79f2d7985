"""Norms written out as separate ops (analysis/rules/norm_written.py): recognised by what the
ops compute, their backward ops joined by autograd sequence number, and nothing else taken."""

from __future__ import annotations

import numpy as np

from membound.analysis.rules import norm_written as nw

B = 8 * 1024 * 1024 * 4.0  # an fp32 (8, 1024, 1024) activation
SMALL = 8 * 1024 * 4.0  # its per-row statistic (8, 1024, 1)


def _find(rows, tid=None):
    """rows: (name, first input bytes, seq, backward, storage dtype)."""
    letters = nw.letters_of([r[0] for r in rows])
    out = np.array([r[1] for r in rows], dtype=np.float64)
    seq = np.array([r[2] for r in rows], dtype=np.int64)
    bwd = np.array([r[3] for r in rows], dtype=bool)
    storage = [r[4] for r in rows]
    tids = np.array(tid if tid is not None else [1 if not r[3] else 2 for r in rows])
    return nw.find(letters, tids, out, seq, bwd, storage)


# HF's LlamaRMSNorm forward on an fp32 residual stream (the casts are no-ops: no kernels)
RMS_FWD = [
    ("aten::pow", B, 10, False, "float"),
    ("aten::mean", B, 11, False, "float"),
    ("aten::add", SMALL, 12, False, "float"),
    ("aten::rsqrt", SMALL, 13, False, "float"),
    ("aten::mul", B, 14, False, "float"),
    ("aten::mul", 4096.0, 15, False, "float"),  # weight * x (the weight is the first input)
]
MM = ("aten::mm", B / 2, 16, False, "c10::BFloat16")


def test_rms_norm_forward_and_backward_by_sequence_number():
    bwd = [
        ("aten::mul", B, 15, True, "float"),
        ("aten::sum", B, 15, True, "float"),
        ("aten::mul", B, 14, True, "float"),
        ("aten::add_", B, 14, True, "float"),  # x used twice inside the norm: its own work
        ("aten::pow", SMALL, 13, True, "float"),
        ("aten::div", B, 11, True, "float"),
        ("aten::mul", B, 10, True, "float"),
        ("aten::add_", B, 10, True, "float"),  # the input's gradient summed with the residual's
        ("aten::mul", B, 99, True, "float"),  # another op's backward
    ]
    rows = [MM, *RMS_FWD, MM, *bwd]
    (g,) = _find(rows)
    assert g.kind == "rms_norm" and g.forward == [1, 2, 3, 4, 5, 6]
    assert g.backward == [8, 9, 10, 11, 12, 13, 14]  # not the residual's add_ (15), not seq 99
    assert g.input_bytes == B and g.fp32
    assert nw.fused_bytes(g) == (2 * B, 3 * B)


def test_leading_cast_sets_the_input_bytes_and_dtype():
    """A bf16 activation cast to fp32 first: the fused kernel reads the bf16 tensor."""
    rows = [("aten::copy_", B / 2, 9, False, "c10::BFloat16"), *RMS_FWD, MM]
    (g,) = _find(rows)
    assert g.forward[0] == 0 and g.input_bytes == B / 2 and not g.fp32
    assert g.backward == [] and nw.fused_bytes(g) == (B, 0.0)  # no sequence numbers: forward only


def test_layer_norm_written_out():
    rows = [
        ("aten::mean", B, 1, False, "float"),
        ("aten::sub", B, 2, False, "float"),
        ("aten::pow", B, 3, False, "float"),
        ("aten::mean", B, 4, False, "float"),
        ("aten::add", SMALL, 5, False, "float"),
        ("aten::sqrt", SMALL, 6, False, "float"),
        ("aten::div", B, 7, False, "float"),
        ("aten::mul", 4096.0, 8, False, "float"),
        ("aten::add", B, 9, False, "float"),
        MM,
    ]
    (g,) = _find(rows)
    assert g.kind == "layer_norm" and g.forward == list(range(9))


def test_look_alikes_are_not_norms():
    # the normalizing multiply reads a tensor of another size than the squared one
    wrong_size = [*RMS_FWD[:4], ("aten::mul", B / 4, 14, False, "float")]
    assert _find(wrong_size) == []
    # a mean and a multiply without the rsqrt: not a norm
    assert _find([("aten::pow", B, 1, False, "float"), ("aten::mean", B, 2, False, "float"),
                  ("aten::mul", B, 3, False, "float"), MM]) == []  # fmt: skip
    # the forward ops on two threads do not make one norm
    assert _find(RMS_FWD, tid=[1, 1, 1, 3, 3, 3]) == []
    # a backward thread's ops never start a norm
    assert _find([(n, b, s, True, d) for n, b, s, _, d in RMS_FWD]) == []


def test_every_norm_of_a_repeated_block_is_found_once():
    rows = []
    for k in range(3):
        rows += [(n, b, s + 100 * k, bw, d) for n, b, s, bw, d in RMS_FWD] + [MM]
    groups = _find(rows)
    assert [g.forward[0] for g in groups] == [0, 7, 14]
    assert all(len(g.forward) == 6 for g in groups)
