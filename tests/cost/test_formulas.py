"""Each formula family against hand-computed FLOPs and bytes (post-hoc inputs)."""

from __future__ import annotations

import pytest

from membound.cost import Cost, cost_of

F, H, BF, L = "float", "c10::Half", "c10::BFloat16", "long int"


def c(name, dims, types, concrete=None):
    return cost_of(name, dims, types, concrete)


# --- matmul -------------------------------------------------------------------------


def test_mm_bf16():
    got = c("aten::mm", [[256, 512], [512, 1024]], [BF, BF])
    reads = 2 * (256 * 512 + 512 * 1024)  # both operands; the product is written
    assert got == Cost(
        2 * 256 * 512 * 1024, reads + 2 * 256 * 1024, "bf16", True, "matmul", read_bytes=reads
    )
    assert got.intensity == pytest.approx(got.flops / got.bytes)


def test_addmm_counts_bias_storage():
    got = c(
        "aten.addmm.default",
        [[1024], [8, 256], [256, 1024], [], []],
        [H, H, H, "Scalar", "Scalar"],
        ["", "", "", "1", "1"],
    )
    assert got.flops == 2 * 8 * 256 * 1024
    assert got.bytes == 2 * (1024 + 8 * 256 + 256 * 1024 + 8 * 1024)
    assert got.compute == "fp16"


def test_bmm_baddbmm_matmul_linear():
    assert c("aten::bmm", [[3, 4, 5], [3, 5, 6]], [F, F]) == Cost(
        2 * 3 * 4 * 5 * 6, 4 * (60 + 90 + 72), "fp32", True, "matmul", 4 * (60 + 90)
    )
    got = c(
        "aten::baddbmm", [[3, 4, 6], [3, 4, 5], [3, 5, 6], [], []], [F, F, F, "Scalar", "Scalar"]
    )
    assert got == Cost(
        2 * 3 * 4 * 5 * 6, 4 * (72 + 60 + 90 + 72), "fp32", True, "matmul", 4 * (72 + 60 + 90)
    )
    # matmul broadcasting (2, 3, 4, 5) @ (5, 6) -> (2, 3, 4, 6)
    got = c("aten::matmul", [[2, 3, 4, 5], [5, 6]], [F, F])
    assert (got.flops, got.bytes) == (2 * 24 * 5 * 6, 4 * (120 + 30 + 144))
    # linear(x (4, 7, 16), W (32, 16), b (32)) -> (4, 7, 32)
    got = c("aten::linear", [[4, 7, 16], [32, 16], [32]], [F, F, F])
    assert (got.flops, got.bytes) == (2 * 28 * 16 * 32, 4 * (448 + 512 + 32 + 896))


def test_fp64_and_fp8_keys():
    assert c("aten::mm", [[2, 2], [2, 2]], ["double", "double"]).compute == "fp64"
    got = c("aten::_scaled_mm", [[16, 32], [32, 64], [], [], [], [], [], []],
            ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", F, F, "", "", "Scalar", "Scalar"],
            ["", "", "", "", "", "", "15", "False"])  # fmt: skip
    # fp8 operands, two 0-dim fp32 scales, bf16 (code 15) output
    reads = 16 * 32 + 32 * 64 + 4 + 4
    assert got == Cost(2 * 16 * 32 * 64, reads + 2 * 16 * 64, "fp8", True, "matmul", reads)


# --- convolution ------------------------------------------------------------------


def test_convolution_forward_infers_output():
    # x (2, 3, 10, 10), w (8, 3, 3, 3), stride 2, pad 1 -> out (2, 8, 5, 5)
    dims = [[2, 3, 10, 10], [8, 3, 3, 3], [8], [], [], [], [], [], []]
    types = [F, F, F, "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"]
    conc = ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]
    got = c("aten::convolution", dims, types, conc)
    assert got.flops == 2 * 2 * 8 * 3 * 9 * 25
    assert got.bytes == 4 * (600 + 216 + 8 + 400)
    assert got.compute == "fp32" and got.family == "conv"


def test_cudnn_convolution_grouped_dilated():
    # (self, weight, padding, stride, dilation, groups, benchmark, deterministic, tf32)
    # x (1, 4, 9, 9), w (4, 2, 3, 3), groups 2, dilation 2, pad 0, stride 1 -> (1, 4, 5, 5)
    got = c("aten::cudnn_convolution", [[1, 4, 9, 9], [4, 2, 3, 3]] + [[]] * 7,
            [H, H, "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", "Scalar", "Scalar"],
            ["", "", "[0, 0]", "[1, 1]", "[2, 2]", "2", "False", "False", "True"])  # fmt: skip
    assert got.flops == 2 * 1 * 4 * 2 * 9 * 25
    assert got.bytes == 2 * (324 + 72 + 100)


def test_convolution_backward():
    # grad_out (2, 8, 5, 5), x (2, 3, 10, 10), w (8, 3, 3, 3), all three grads
    dims = [[2, 8, 5, 5], [2, 3, 10, 10], [8, 3, 3, 3]] + [[]] * 8
    types = [
        F,
        F,
        F,
        "ScalarList",
        "ScalarList",
        "ScalarList",
        "ScalarList",
        "Scalar",
        "ScalarList",
        "Scalar",
        "ScalarList",
    ]
    conc = [
        "",
        "",
        "",
        "[8]",
        "[2, 2]",
        "[1, 1]",
        "[1, 1]",
        "False",
        "[0, 0]",
        "1",
        "[True, True, True]",
    ]
    got = c("aten::convolution_backward", dims, types, conc)
    assert got.flops == 2 * (2 * 2 * 8 * 3 * 9 * 25)  # dgrad and wgrad each = forward
    assert got.bytes == 4 * ((400 + 600 + 216) + (600 + 216 + 8))


# --- attention ------------------------------------------------------------------


def test_flash_attention_forward_and_causal():
    q = [4, 8, 1024, 64]
    dims = [q, q, q, [], [], [], []]
    types = [BF, BF, BF, "Scalar", "Scalar", "Scalar", ""]
    got = c(
        "aten::_scaled_dot_product_flash_attention",
        dims,
        types,
        ["", "", "", "0.", "False", "False", ""],
    )
    n = 4 * 8 * 1024 * 64
    assert got.flops == 2 * (2 * 4 * 8 * 1024 * 1024 * 64)
    # q, k, v read, out written (bf16) + logsumexp (fp32, B*H*L): no L x L matrix
    assert got.bytes == 2 * 4 * n + 4 * 4 * 8 * 1024
    assert got.read_bytes == 2 * 3 * n
    assert got.compute == "bf16"
    causal = c(
        "aten::_scaled_dot_product_flash_attention",
        dims,
        types,
        ["", "", "", "0.", "True", "False", ""],
    )
    assert causal.flops == got.flops / 2 and causal.bytes == got.bytes


def test_flash_attention_blhe_layout_and_gqa():
    # _flash_attention_forward takes (B, L, H, E); GQA: 8 query heads, 2 kv heads
    q, kv = [2, 128, 8, 64], [2, 128, 2, 64]
    got = c("aten::_flash_attention_forward", [q, kv, kv] + [[]] * 7, [H, H, H] + [""] * 7,
            ["", "", "", "", "", "128", "128", "0.", "False", "False"])  # fmt: skip
    assert got.flops == 2 * (2 * 2 * 8 * 128 * 128 * 64)
    assert got.bytes == 2 * (2 * 128 * 8 * 64 * 2 + 2 * 2 * 128 * 2 * 64) + 4 * 2 * 8 * 128


def test_efficient_attention_backward():
    q = [2, 4, 256, 32]
    dims = [q, q, q, q, [], q, [2, 4, 256], [], [], [], [], [], []]
    types = [H, H, H, H, "", H, F, L, L, "Scalar", "ScalarList", "Scalar", ""]
    conc = [""] * 9 + ["0.", "[True, True, True, False]", "False", ""]
    got = c("aten::_scaled_dot_product_efficient_attention_backward", dims, types, conc)
    n = 2 * 4 * 256 * 32
    assert got.flops == 5 * 2 * 2 * 4 * 256 * 256 * 32
    # reads dO, q, k, v, out, lse; writes dq, dk, dv
    assert got.bytes == 2 * 5 * n + 4 * 2 * 4 * 256 + 2 * 3 * n
    assert got.read_bytes == 2 * 5 * n + 4 * 2 * 4 * 256


# --- norms ------------------------------------------------------------------------


def test_layer_norm_bf16_stats_fp32():
    got = c("aten::native_layer_norm", [[64, 4096], [], [4096], [4096], []],
            [BF, "ScalarList", BF, BF, "Scalar"], ["", "[4096]", "", "", "1e-05"])  # fmt: skip
    n = 64 * 4096
    reads = 2 * (n + 4096 * 2)  # x, weight, bias; y (bf16), mean and rstd (fp32) written
    assert got == Cost(7 * n, reads + 2 * n + 4 * 64 * 2, "fp32_vector", True, "norm", reads)


def test_layer_norm_backward_without_affine_grads():
    dims = [[8, 16], [8, 16], [], [8, 1], [8, 1], [16], [16], []]
    types = [F, F, "ScalarList", F, F, F, F, "ScalarList"]
    got = c(
        "aten::native_layer_norm_backward",
        dims,
        types,
        ["", "", "[16]", "", "", "", "", "[True, False, False]"],
    )
    assert got.flops == 8 * 128
    assert got.bytes == 4 * (128 + 128 + 8 + 8 + 16) + 4 * 128
    assert got.read_bytes == 4 * (128 + 128 + 8 + 8 + 16)  # the bias is not read


def test_rms_norm_group_norm_batch_norm():
    got = c(
        "aten::_fused_rms_norm",
        [[32, 128], [], [128], []],
        [H, "ScalarList", H, "Scalar"],
        ["", "[128]", "", ""],
    )
    assert got == Cost(
        4 * 4096, 2 * (4096 + 128 + 4096) + 4 * 32, "fp32_vector", True, "norm", 2 * (4096 + 128)
    )
    # native_group_norm(x (2, 8, 5, 5), w, b, N, C, HxW, group, eps)
    got = c("aten::native_group_norm", [[2, 8, 5, 5], [8], [8]] + [[]] * 5, [F, F, F] + ["Scalar"] * 5,
            ["", "", "", "2", "8", "25", "2", "1e-05"])  # fmt: skip
    assert got == Cost(
        7 * 400, 4 * (400 + 8 + 8 + 400 + 2 * 2 * 2), "fp32_vector", True, "norm", 4 * (400 + 16)
    )
    # native_batch_norm training: + save_mean/invstd (8 each) + running stats rewritten
    dims = [[2, 8, 5, 5], [8], [8], [8], [8], [], [], []]
    types = [F] * 5 + ["Scalar"] * 3
    got = c("aten::native_batch_norm", dims, types, ["", "", "", "", "", "True", "0.1", "1e-05"])
    reads = 4 * (400 + 4 * 8)  # x, weight, bias, running mean and var
    assert got == Cost(
        7 * 400, reads + 4 * (400 + 2 * 8 + 2 * 8), "fp32_vector", True, "norm", reads
    )
    evaluation = c(
        "aten::native_batch_norm", dims, types, ["", "", "", "", "", "False", "0.1", "1e-05"]
    )
    assert evaluation == Cost(4 * 400, reads + 4 * 400, "fp32_vector", True, "norm", reads)


def test_batch_norm_backward():
    dims = [[2, 8, 5, 5], [2, 8, 5, 5], [8], [8], [8], [8], [8], [], [], []]
    types = [F] * 7 + ["Scalar", "Scalar", "ScalarList"]
    got = c(
        "aten::native_batch_norm_backward",
        dims,
        types,
        [""] * 7 + ["True", "1e-05", "[True, True, True]"],
    )
    reads = 4 * (800 + 5 * 8)  # dy, x and the five per-channel tensors
    assert got == Cost(11 * 400, reads + 4 * (400 + 16), "fp32_vector", True, "norm", reads)


# --- softmax, dropout, loss -----------------------------------------------------


def test_softmax_family():
    got = c("aten::_softmax", [[32, 1000], [], []], [H, "Scalar", "Scalar"], ["", "-1", "True"])
    assert got == Cost(
        5 * 32000, 2 * 32000 + 4 * 32000, "fp32_vector", True, "softmax", 2 * 32000
    )  # half_to_float
    got = c(
        "aten::_log_softmax_backward_data",
        [[32, 1000], [32, 1000], [], []],
        [F, F, "Scalar", "Scalar"],
        ["", "", "1", "6"],
    )
    assert got == Cost(4 * 32000, 4 * 3 * 32000, "fp32_vector", True, "softmax", 4 * 2 * 32000)


def test_dropout():
    got = c(
        "aten::native_dropout", [[64, 512], [], []], [BF, "Scalar", "Scalar"], ["", "0.1", "True"]
    )
    n = 64 * 512
    # + bool mask
    assert got == Cost(2 * n, 2 * n + 2 * n + n, "fp32_vector", True, "dropout", 2 * n)
    got = c(
        "aten::native_dropout_backward",
        [[64, 512], [64, 512], []],
        [BF, "bool", "Scalar"],
        ["", "", "1.11"],
    )
    assert got == Cost(2 * n, 2 * n + n + 2 * n, "fp32_vector", True, "dropout", 2 * n + n)


def test_cross_entropy_and_nll():
    got = c("aten::cross_entropy_loss", [[32, 128], [32], [], [], [], []], [F, L, "", "Scalar", "Scalar", "Scalar"],
            ["", "", "", "1", "-100", "0."])  # fmt: skip
    reads = 4 * 4096 + 8 * 32  # logits and targets; the loss written
    assert got == Cost(5 * 4096 + 32, reads + 4, "fp32_vector", True, "loss", reads)
    got = c(
        "aten::nll_loss_forward",
        [[32, 128], [32], [], [], []],
        [F, L, "", "Scalar", "Scalar"],
        ["", "", "", "1", "-100"],
    )
    # one gathered log-prob per row, targets, loss + total_weight
    assert got == Cost(32, 4 * 32 + 8 * 32 + 4 + 4, "fp32_vector", True, "loss", 4 * 32 + 8 * 32)
    got = c("aten::nll_loss_backward", [[], [32, 128], [32], [], [], [], []], [F, F, L, "", "Scalar", "Scalar", F],
            ["", "", "", "", "1", "-100", ""])  # fmt: skip
    # grad_output, targets, total_weight, one written element per row (zero_ is its own op)
    assert got == Cost(32, 4 + 8 * 32 + 4 + 4 * 32, "fp32_vector", True, "loss", 4 + 8 * 32 + 4)


# --- pointwise & reductions ---------------------------------------------------------


def test_binary_broadcast_and_promotion():
    got = c("aten::add", [[32, 128], [128], []], [H, F, "Scalar"], ["", "", "1"])
    # fp16 + fp32 -> fp32 output of the broadcast shape
    reads = 2 * 4096 + 4 * 128
    # the largest tensor read: the fp16 (32, 128) input
    assert got == Cost(4096, reads + 4 * 4096, "fp32_vector", True, "pointwise", reads,
                       largest_read=2 * 4096)  # fmt: skip
    got = c("aten::mul", [[32, 128], []], [BF, "double"], ["", ""])  # x * 2.0
    assert got == Cost(4096, 2 * 2 * 4096, "fp32_vector", True, "pointwise", 2 * 4096,
                       largest_read=2 * 4096)  # fmt: skip
    got = c("aten::gt", [[32, 128], []], [F, "Scalar"], ["", "0"])
    assert got.bytes == 4 * 4096 + 4096  # bool output


def test_broadcast_stride_zero_input_post_hoc():
    # an expanded (32, 128) view of a (128,) bias, as the trace records it
    got = cost_of("aten::add", [[32, 128], [32, 128], []], [F, F, "Scalar"], ["", "", "1"],
                  [[128, 1], [0, 1], []])  # fmt: skip
    assert got.bytes == 4 * (4096 + 128 + 4096)


@pytest.mark.parametrize(
    "op,flops", [("relu", 1), ("gelu", 5), ("silu", 4), ("sigmoid", 4), ("tanh", 1), ("exp", 1)]
)
def test_unary_activations(op, flops):
    got = c(f"aten::{op}", [[10, 20]], [F], [""])
    assert got == Cost(flops * 200, 4 * 400, "fp32_vector", True, "pointwise", 4 * 200,
                       largest_read=4 * 200)  # fmt: skip


def test_activation_backward_and_inplace():
    assert (
        c(
            "aten::threshold_backward", [[10, 20], [10, 20], []], [F, F, "Scalar"], ["", "", "0"]
        ).flops
        == 200
    )
    assert c("aten::gelu_backward", [[10, 20], [10, 20], []], [F, F, ""]).flops == 2000
    got = c("aten::add_", [[10, 20], [20], []], [F, F, "Scalar"], ["", "", "1"])
    # in place: self and other read, self written
    assert got == Cost(200, 4 * (200 + 20 + 200), "fp32_vector", True, "pointwise", 4 * 220,
                       largest_read=4 * 200)  # fmt: skip


def test_reductions():
    got = c(
        "aten::sum",
        [[32, 128], [], [], []],
        [F, "ScalarList", "Scalar", ""],
        ["", "[1]", "False", ""],
    )
    assert got == Cost(4096, 4 * (4096 + 32), "fp32_vector", True, "reduction", 4 * 4096)
    got = c("aten::sum", [[32, 128], []], [BF, ""], ["", ""])  # all dims
    assert got == Cost(4096, 2 * 4096 + 2, "fp32_vector", True, "reduction", 2 * 4096)
    got = c(
        "aten::mean",
        [[32, 128], [], [], []],
        [F, "ScalarList", "Scalar", ""],
        ["", "[-1]", "True", ""],
    )
    assert got == Cost(4096 + 32, 4 * (4096 + 32), "fp32_vector", True, "reduction", 4 * 4096)
    got = c(
        "aten::var",
        [[32, 128], [], [], []],
        [F, "ScalarList", "Scalar", "Scalar"],
        ["", "[0]", "1", "False"],
    )
    assert got == Cost(3 * 4096, 4 * (4096 + 128), "fp32_vector", True, "reduction", 4 * 4096)
    got = c("aten::sum", [[10], []], [L, ""])  # int sums accumulate in int64
    assert got.bytes == 8 * 10 + 8


# --- memory: embedding, copies, views -------------------------------------------


def test_embedding_reads_only_selected_rows():
    got = c(
        "aten::embedding", [[50000, 512], [4, 7], [], [], []], [H, L, "Scalar", "Scalar", "Scalar"]
    )
    reads = 2 * 28 * 512 + 8 * 28  # the 28 selected rows and the indices
    assert got == Cost(0, reads + 2 * 28 * 512, "fp32_vector", True, "embedding", reads)
    got = c("aten::embedding_dense_backward", [[4, 7, 512], [4, 7], [], [], []], [H, L, "Scalar", "Scalar", "Scalar"],
            ["", "", "50000", "-1", "False"])  # fmt: skip
    reads = 2 * 28 * 512 + 8 * 28  # the gradient and the indices; the whole table written
    assert got == Cost(28 * 512, reads + 2 * 50000 * 512, "fp32_vector", True, "embedding", reads)


def test_copies_and_casts():
    got = c(
        "aten::_to_copy",
        [[32, 128]] + [[]] * 6,
        [F, "Scalar", "", "", "", "Scalar", ""],
        ["", "15", "", "", "", "False", ""],
    )
    # fp32 -> bf16
    assert got == Cost(0, 4 * 4096 + 2 * 4096, "fp32_vector", True, "copy", 4 * 4096)
    got = c("aten::copy_", [[32, 128], [32, 128], []], [BF, F, "Scalar"], ["", "", "False"])
    assert got.bytes == 4 * 4096 + 2 * 4096  # src read, self written (not read)
    assert got.read_bytes == 4 * 4096
    assert c("aten::clone", [[7, 9], []], [F, ""]).bytes == 2 * 4 * 63
    got = c("aten::cat", [[[32, 128], [32, 128]], []], ["TensorList", "Scalar"], ["", "0"])
    assert got.bytes == 2 * 4 * 8192
    assert got.read_bytes == 4 * 8192


@pytest.mark.parametrize("op", ["view", "aten.t.default", "transpose", "permute", "expand", "as_strided",
                                "slice", "select", "unsqueeze", "detach", "_unsafe_view", "alias"])  # fmt: skip
def test_views_are_free(op):
    got = c(op, [[32, 128], []], [F, "ScalarList"], ["", "[4096]"])
    assert got == Cost(0.0, 0.0, None, True, "view", 0.0)


def test_fills_write_only():
    assert c("aten::zero_", [[16, 16]], [H]).bytes == 2 * 256
    assert c("aten::zero_", [[16, 16]], [H]).read_bytes == 0
    got = c(
        "aten::zeros",
        [[], [], [], [], []],
        ["ScalarList", "Scalar", "", "", ""],
        ["[4, 8]", "5", "", "", ""],
    )
    assert got.bytes == 2 * 32  # fp16 (code 5)
    assert got.read_bytes == 0


def test_transposed_convolution_infers_output():
    # x (1, 4, 5, 5), w (4, 2, 3, 3), stride 2, pad 1, output_padding 1 -> out (1, 2, 10, 10)
    dims = [[1, 4, 5, 5], [4, 2, 3, 3], [], [], [], [], [], [], []]
    types = [F, F, "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"]
    conc = ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "True", "[1, 1]", "1"]
    got = c("aten::convolution", dims, types, conc)
    assert got.flops == 2 * 25 * 9 * 4 * 2  # per *input* position for a transposed conv
    assert got.bytes == 4 * (100 + 72 + 200)


def test_conv_live_matches_post_hoc_for_transposed_and_grouped():
    import torch
    import torch.nn.functional as tF

    from membound.cost import CostCounter

    x, w = torch.randn(1, 4, 5, 5), torch.randn(4, 2, 3, 3)
    with CostCounter() as counter:
        tF.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1)
        tF.conv2d(torch.randn(2, 4, 9, 9), torch.randn(6, 2, 3, 3), groups=2, dilation=2)
    convs = [r.cost for r in counter.records if r.name == "aten::convolution"]
    assert convs[0] == c("aten::convolution", [[1, 4, 5, 5], [4, 2, 3, 3]] + [[]] * 7,
                         [F, F, "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"],
                         ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "True", "[1, 1]", "1"])  # fmt: skip
    # grouped + dilated: out (2, 6, 5, 5); weight in-channels already per group
    assert convs[1].flops == 2 * 2 * 6 * 2 * 9 * 25
    assert convs[1].bytes == 4 * (2 * 4 * 81 + 6 * 2 * 9 + 2 * 6 * 25)
