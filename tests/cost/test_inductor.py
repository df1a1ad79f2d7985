"""Inductor's Triton kernels costed from their recorded arguments: bytes by hand count,
FLOPs from the fused ops the name lists, template matmuls 2·M·N·K, unknown names
bytes-only; and the roofline join places them (the kernel's own range is its op)."""

from __future__ import annotations

import pytest

from membound.cost import cost_of
from membound.cost.formulas.inductor import parse_name
from membound.cost.registry import family_of
from support.tracebuilder import TraceBuilder

BF16 = "c10::BFloat16"


@pytest.mark.parametrize(
    "name, kind, ops",
    [
        ("triton_poi_fused_add_mul_0", "poi", ["add", "mul"]),
        ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_3", "red",
         ["_to_copy", "add", "mean", "mul", "pow", "rsqrt"]),
        ("triton_per_fused_native_layer_norm_native_layer_norm_backward_12", "per",
         ["native_layer_norm", "native_layer_norm_backward"]),
        ("triton_tem_fused_addmm_gelu_7", "tem", ["addmm", "gelu"]),
        ("triton_poi_fused_0", "poi", []),
        ("triton_poi_fused_gelu_frobnicate_2", "poi", ["gelu", "?"]),
    ],
)  # fmt: skip
def test_names_list_their_fused_ops(name, kind, ops):
    assert parse_name(name) == (kind, ops)


def test_not_an_inductor_name():
    assert parse_name("aten::add") is None and parse_name("triton_foo") is None
    assert family_of("triton_poi_fused_add_0") == "inductor"


def test_pointwise_bytes_by_hand_and_flops_per_fused_op():
    # out = (x + bias) * y: x, y, out [4096, 768] bf16; bias [768] bf16; then xnumel
    dims = [[4096, 768], [768], [4096, 768], [4096, 768], []]
    cost = cost_of("triton_poi_fused_add_mul_0", dims, [BF16] * 4 + ["Scalar"],
                   ["", "", "", "", "3145728"])  # fmt: skip
    assert cost.bytes == 3 * 4096 * 768 * 2 + 768 * 2
    assert cost.flops == 2 * 4096 * 768  # add and mul, per element of the iteration space
    assert cost.family == "inductor" and cost.exact and cost.compute == "fp32_vector"


def test_an_expanded_argument_costs_what_it_stores():
    dims = [[4096, 768], [4096, 768], []]
    strides = [[0, 1], [768, 1], []]  # the first is a bias expanded over rows
    cost = cost_of("triton_poi_fused_add_0", dims, [BF16, BF16, "Scalar"], ["", "", "3145728"],
                   strides)  # fmt: skip
    assert cost.bytes == 768 * 2 + 4096 * 768 * 2


def test_reduction_and_norm_counts():
    # RMSNorm as inductor fuses it: x [8, 4096] fp32 in, weight [4096], out [8, 4096]
    dims = [[8, 4096], [4096], [8, 4096], [], []]
    types = ["float", "float", "float", "Scalar", "Scalar"]
    cost = cost_of("triton_per_fused__fused_rms_norm_0", dims, types, ["", "", "", "8", "4096"])
    assert cost.bytes == (2 * 8 * 4096 + 4096) * 4
    assert cost.flops == 8 * 4096 * 4  # rms forward 3 + weight 1


def test_template_matmul_counts_its_product():
    dims = [[512, 1024], [1024, 256], [256], [512, 256]]
    cost = cost_of("triton_tem_fused_addmm_1", dims, [BF16] * 4)
    assert cost.flops == 2 * 512 * 1024 * 256
    assert cost.compute == "bf16" and cost.family == "inductor"
    assert cost.bytes == (512 * 1024 + 1024 * 256 + 256 + 512 * 256) * 2


def test_an_unknown_name_is_bytes_only():
    cost = cost_of("triton_poi_fused_0", [[1000], [1000]], ["float", "float"])
    assert cost.family == "inductor-bytes" and cost.flops == 0 and cost.bytes == 8000
    assert cost.exact  # costed: a memory-bound kernel is placed by its bytes


def test_the_join_places_an_inductor_kernel(tmp_path):
    """Inside a compiled region, the launch sits in the kernel's own range (named like the
    kernel, with its tensors): that range is the op, costed and placed on the roofline."""
    from membound.analysis import analyze
    from membound.device.ceilings import Ceilings

    b = TraceBuilder()
    for s in range(2):
        o = s * 1000.0
        b.step(s, o, 1000)
        b.annotation("Torch-Compiled Region: 0/0", o + 5, 900)
        b.op("triton_poi_fused_add_mul_0", o + 10, 30,
             [[4096, 768], [768], [4096, 768], [4096, 768], []], [BF16] * 4 + ["Scalar"],
             ["", "", "", "", "3145728"])  # fmt: skip
        b.launch("triton_poi_fused_add_mul_0", o + 20, o + 100, 10.0)
    ceil = Ceilings(device="cuda", name="H", memory_bandwidth=4e12, flops={"fp32_vector": 6e13})
    a = analyze([b.write(tmp_path / "t.json")], ceil)
    (row,) = a.ops
    assert row.name == "triton_poi_fused_add_mul_0" and row.exact_cost and row.calls == 2
    nbytes = 3 * 4096 * 768 * 2 + 768 * 2
    assert row.bytes == 2 * nbytes and row.bound == "memory"
    assert row.achieved_bandwidth_fraction == pytest.approx(nbytes / 10e-6 / 4e12)


def test_a_gathered_table_costs_the_rows_the_launch_space_reads():
    """An embedding lookup inductor fused: the table is far larger than the N = xnumel
    points the kernel visits, and each point reads one element of it."""
    # idx [8, 128] int64, table [50000, 64] fp32, out [8, 128, 64] fp32, xnumel = 8*128*64
    dims = [[8, 128], [50000, 64], [8, 128, 64], []]
    types = ["long int", "float", "float", "Scalar"]
    cost = cost_of("triton_poi_fused_embedding_0", dims, types, ["", "", "", "65536"])
    assert cost.bytes == 8 * 128 * 8 + 65536 * 4 + 65536 * 4  # not 50000 * 64 * 4 of table
    assert cost.exact and cost.flops == 0


def test_a_reduction_that_picks_one_logit_per_row():
    """nll_loss forward as inductor fuses it: 2 x 6144 points, one logit loaded per point
    (the target's), so the [12288, 50304] logits cost 12288 elements; FLOPs per point too."""
    dims = [[12, 1024], [12288, 50304], [12288, 1], [12288, 1], [2], [2], [], []]
    types = ["long int", BF16, "float", "float", "long int", "float", "Scalar", "Scalar"]
    concrete = ["", "", "", "", "", "", "2", "6144"]
    name = "triton_red_fused__log_softmax__to_copy__unsafe_view_nll_loss_forward_sub_view_19"
    cost = cost_of(name, dims, types, concrete)
    assert cost.bytes == 12288 * 8 + 12288 * 2 + 2 * 12288 * 4 + 2 * 8 + 2 * 4
    assert cost.flops == 12288 * (6 + 1 + 1)  # log_softmax, nll_loss_forward, sub
    assert cost.exact


def test_a_zero_seed_offset_ends_the_size_run():
    # dropout: seeds [4] int64, load_seed_offset=0, x [1000] fp32, mask [1000] bool, out, xnumel
    dims = [[4], [], [1000], [1000], [1000], []]
    types = ["long int", "Scalar", "float", "bool", "float", "Scalar"]
    cost = cost_of("triton_poi_fused_native_dropout_0", dims, types, ["", "0", "", "", "", "1000"])
    assert cost.bytes == 4 * 8 + 1000 * 4 + 1000 + 1000 * 4  # N = 1000, not 0 * 1000
    assert cost.exact


def test_sizes_no_argument_spans_bound_nothing_and_are_inexact():
    """A trailing int that is not the launch space (no argument has that many elements):
    the arguments cannot tell what the kernel touches, so nothing is bounded and the cost
    is inexact rather than a guess."""
    dims = [[4096, 768], [4096, 768], []]
    cost = cost_of("triton_poi_fused_add_0", dims, [BF16, BF16, "Scalar"], ["", "", "1"])
    assert cost.bytes == 2 * 4096 * 768 * 2 and not cost.exact


def test_a_kernel_that_only_writes_is_a_fill():
    cost = cost_of("triton_poi_fused_embedding_dense_backward_15", [[50304, 768], []],
                   ["float", "Scalar"], ["", "38633472"])  # fmt: skip
    assert cost.family == "fill" and cost.flops == 0 and cost.bytes == 50304 * 768 * 4
    assert family_of("triton_poi_fused_zeros_0") == "inductor"  # the registry's family stays


def test_a_template_reads_its_operands_whole():
    # a template passes no launch-space sizes; a trailing size variable bounds nothing
    dims = [[512, 1024], [1024, 256], [512, 256], []]
    cost = cost_of("triton_tem_fused_mm_0", dims, [BF16] * 3 + ["Scalar"], ["", "", "", "8"])
    assert cost.bytes == (512 * 1024 + 1024 * 256 + 512 * 256) * 2 and cost.exact
