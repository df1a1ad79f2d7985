"""Inductor kernels' bytes split into reads and writes by their launch parameter names
(`OpCall.arg_names`, from the capture's `kernel_args`): `in_ptr*` / `arg_*` read, `out_ptr*`
written, `in_out_ptr*` both, so counted twice. Names that do not fit the recorded arguments
leave the cost as the trace alone gives it (`read_bytes=None`). Every figure is a hand count
from the arguments' shapes and dtypes."""

from __future__ import annotations

import pytest

from membound.cost import cost_of
from membound.cost.call import OpCall
from membound.cost.formulas.inductor import param_role

BF16 = "c10::BFloat16"
#: an odd length, so no count happens to come out right by a power of two
N = 4231


def _cast(names=None):
    """fp32 -> bf16 cast of N elements: in_ptr0 [N] fp32, out_ptr0 [N] bf16, then xnumel."""
    return cost_of("triton_poi_fused__to_copy_0", [[N], [N], []], ["float", BF16, "Scalar"],
                   ["", "", str(N)], arg_names=names)  # fmt: skip


def test_a_cast_reads_its_input_and_writes_its_output():
    cost = _cast(["in_ptr0", "out_ptr0", "xnumel"])
    assert cost.read_bytes == 4 * N  # the fp32 input
    assert cost.bytes == 4 * N + 2 * N  # and the bf16 output written
    assert cost.exact and cost.family == "inductor" and cost.flops == 0


def test_without_names_the_split_is_unknown_and_the_bytes_the_same():
    cost = _cast()
    assert cost.read_bytes is None and cost.bytes == 6 * N
    assert cost.largest_read is None


def test_the_largest_read_argument_is_kept():
    """BatchNorm backward as inductor fuses it (the compiled DCGAN's, shrunk): three
    [2, 3, 5, 7] fp32 reads, one [1, 3, 1, 1] read of the channel weights, two [3, 5] fp32
    partial sums written. The largest read is one [2, 3, 5, 7] fp32 tensor; reads bigger than
    L2 on their own keep a call on HBM's roof (`analysis.roofline.call_memory_roof`)."""
    n = 2 * 3 * 5 * 7
    dims = [[2, 3, 5, 7]] * 3 + [[1, 3, 1, 1], [3, 5], [3, 5], [], []]
    strides = [[105, 35, 7, 1]] * 3 + [[3, 1, 1, 1], [1, 3], [1, 3], [], []]
    types = ["float"] * 6 + ["Scalar", "Scalar"]
    names = ["in_ptr0", "in_ptr1", "in_ptr2", "in_ptr3", "out_ptr0", "out_ptr1", "xnumel",
             "r0_numel"]  # fmt: skip
    cost = cost_of("triton_red_fused_native_batch_norm_backward_threshold_backward_1", dims,
                   types, ["", "", "", "", "", "", "15", "14"], strides,
                   arg_names=names)  # fmt: skip
    assert cost.largest_read == 4 * n
    assert cost.read_bytes == 3 * 4 * n + 4 * 3


@pytest.mark.parametrize(
    "names",
    [
        ["in_ptr0", "out_ptr0"],  # one name short: not this kernel's parameters
        ["in_ptr0", "out_ptr0", "xnumel", "ks0"],  # one too many
        ["in_ptr0", "ws_ptr", "xnumel"],  # a tensor whose name says nothing of its role
        [],
    ],
)
def test_names_that_do_not_fit_cost_as_without_them(names):
    assert _cast(names) == _cast()


def test_an_in_place_buffer_is_read_and_written():
    """GELU backward as inductor writes it: the gradient [9, 41] bf16 is updated in place
    (`in_out_ptr0`) from the activation (`in_ptr0`): each element of the gradient read and
    written, each of the activation read. Without the names the gradient counts once."""
    n = 9 * 41
    dims, types = [[9, 41], [9, 41], []], [BF16, BF16, "Scalar"]
    name = "triton_poi_fused_gelu_gelu_backward_0"
    named = cost_of(name, dims, types, ["", "", str(n)],
                    arg_names=["in_out_ptr0", "in_ptr0", "xnumel"])  # fmt: skip
    assert named.read_bytes == 2 * n * 2
    assert named.bytes == 3 * n * 2
    assert cost_of(name, dims, types, ["", "", str(n)]).bytes == 2 * n * 2
    assert named.flops == cost_of(name, dims, types, ["", "", str(n)]).flops


def test_a_fill_reads_nothing():
    """A kernel whose only tensor it writes (the zeros an embedding backward scatters into):
    the same fill, now with the split said, 0 read."""
    args = ([[50304, 768], []], ["float", "Scalar"], ["", "38633472"])
    name = "triton_poi_fused_embedding_dense_backward_15"
    named = cost_of(name, *args, arg_names=["out_ptr0", "xnumel"])
    assert named.family == "fill" and named.read_bytes == 0
    assert named.bytes == 50304 * 768 * 4 == cost_of(name, *args).bytes


def test_one_buffer_updated_in_place_is_not_a_fill():
    """`x.mul_(2)`: its one tensor is an in_out_ptr, read and written at every point. The
    names tell it from a fill, which the trace alone cannot."""
    args = ([[N], []], ["float", "Scalar"], ["", str(N)])
    named = cost_of("triton_poi_fused_mul_0", *args, arg_names=["in_out_ptr0", "xnumel"])
    assert named.family == "inductor" and named.flops == N
    assert named.read_bytes == 4 * N and named.bytes == 2 * 4 * N
    assert cost_of("triton_poi_fused_mul_0", *args).family == "fill"


def test_the_split_counts_what_the_launch_space_touches():
    """An embedding gather: the table [50000, 64] is read at the N = xnumel points the
    kernel visits, not whole; the split bounds it the same way."""
    dims = [[8, 128], [50000, 64], [8, 128, 64], []]
    types = ["long int", "float", "float", "Scalar"]
    cost = cost_of("triton_poi_fused_embedding_0", dims, types, ["", "", "", "65536"],
                   arg_names=["in_ptr0", "in_ptr1", "out_ptr0", "xnumel"])  # fmt: skip
    assert cost.read_bytes == 8 * 128 * 8 + 65536 * 4
    assert cost.bytes == 8 * 128 * 8 + 65536 * 4 + 65536 * 4


def test_a_template_matmul_reads_its_operands():
    """mm template (`arg_A`, `arg_B`, `out_ptr0`): A [9, 41] and B [41, 341] bf16 read whole,
    C [9, 341] written; its FLOPs are those of the unnamed call."""
    dims, types = [[9, 41], [41, 341], [9, 341]], [BF16] * 3
    named = cost_of("triton_tem_fused_mm_0", dims, types, arg_names=["arg_A", "arg_B", "out_ptr0"])
    assert named.read_bytes == (9 * 41 + 41 * 341) * 2
    assert named.bytes == (9 * 41 + 41 * 341 + 9 * 341) * 2
    assert named.flops == 2 * 9 * 41 * 341 and named.compute == "bf16"
    assert cost_of("triton_tem_fused_mm_0", dims, types).read_bytes is None


def test_op_calls_built_by_position_have_no_names():
    call = OpCall("aten::add", [], None)
    assert call.arg_names is None and call.outputs is None


def test_the_roles_of_inductor_parameter_names():
    """in_ptr read, out_ptr written, in_out_ptr both, a template's arg_ read; scalars and a
    reduction's scratch (`ws_ptr`) have no role, so a kernel passing one is not split."""
    names = ["in_ptr0", "in_ptr12", "out_ptr3", "in_out_ptr0", "arg_A", "arg_B", "xnumel",
             "r0_numel", "ks0", "ws_ptr", "load_seed_offset", ""]  # fmt: skip
    assert [param_role(n) for n in names] == ["r", "r", "w", "rw", "r", "r"] + [None] * 6
