"""An op's `out=` buffers, recorded as its last arguments, are costed as written, not read
(`membound.cost.out_args`), and the table that says which they are agrees with torch's own
schemas."""

from __future__ import annotations

import pytest
import torch

from membound.cost import out_args
from membound.cost.call import TensorMeta
from membound.cost.registry import registered
from membound.cost.trace_args import cost_of

# the T5's masked softmax where of tests/fixtures/h100_real_t5_seq2seq_truth3, as recorded:
# where.self_out(condition [16,8,512,1] bool, 0-dim float, other fp32, out fp32)
DIMS = [[16, 8, 512, 1], [], [16, 8, 512, 512], [16, 8, 512, 512]]
TYPES = ["bool", "float", "float", "float"]
STRIDES = [[4096, 512, 1, 1], [], [2097152, 262144, 512, 1], [2097152, 262144, 512, 1]]
BIG = 16 * 8 * 512 * 512 * 4


def test_where_out_reads_its_inputs_and_writes_its_out_buffer_once():
    c = cost_of("aten::where", DIMS, TYPES, None, STRIDES)
    # reads: the condition (65,536 B), the 0-dim float (4 B), `other` (BIG); writes `out`
    assert c.read_bytes == 16 * 8 * 512 + 4 + BIG
    assert c.bytes == c.read_bytes + BIG
    # the same bytes as the functional call, which writes a new tensor of that shape
    functional = cost_of("aten::where", DIMS[:3], TYPES[:3], None, STRIDES[:3])
    assert (c.bytes, c.read_bytes, c.flops) == (functional.bytes, functional.read_bytes,
                                                functional.flops)  # fmt: skip


def test_a_unary_out_call_is_one_read_and_one_write():
    c = cost_of("aten::abs", [[1000, 10], [1000, 10]], ["float", "float"])
    assert (c.read_bytes, c.bytes) == (40_000, 80_000)


def test_an_argument_of_the_same_count_that_is_no_tensor_is_not_an_out_buffer():
    x = TensorMeta((64, 32), "float32")
    w = TensorMeta((32, 16), "float32")
    # mm.dtype(self, mat2, out_dtype) has as many arguments as mm.out(self, mat2, out)
    assert out_args.split("aten::mm", [x, w, 15]) == ([x, w, 15], None)
    # div.Tensor_mode(self, other, rounding_mode) against div.out(self, other, out)
    assert out_args.split("aten::div", [x, x, "floor"]) == ([x, x, "floor"], None)
    # the functional call: no out buffer
    assert out_args.split("aten::mm", [x, w]) == ([x, w], None)
    o = TensorMeta((64, 16), "float32")
    assert out_args.split("aten::mm", [x, w, o]) == ([x, w], [o])


def test_a_call_with_out_buffers_is_costed_as_written_by_its_formula():
    # add.out(self, other, alpha, out): 2 reads and 1 write of 4 MB, not 3 reads
    n = 1 << 20
    c = cost_of("aten::add", [[n], [n], [], [n]], ["float", "float", "Scalar", "float"],
                ["", "", "1", ""])  # fmt: skip
    assert (c.read_bytes, c.bytes) == (8 * n, 12 * n)


def _is_tensor(arg) -> bool:
    return str(arg.type).startswith("Tensor")


def _derive(names) -> dict[str, dict[int, tuple[int, ...]]]:
    """The table from the installed torch's schemas, by out_args' rule."""
    table: dict[str, dict[int, tuple[int, ...]]] = {}
    for name in names:
        try:
            schemas = torch._C._jit_get_schemas_for_operator(name)
        except RuntimeError:
            continue
        outs: dict[int, set[tuple[int, ...]]] = {}
        for s in schemas:
            pos = tuple(i for i, a in enumerate(s.arguments) if a.is_out)
            if pos and all(_is_tensor(s.arguments[i]) for i in pos):
                outs.setdefault(len(s.arguments), set()).add(pos)
        for n, found in outs.items():
            if len(found) != 1:
                continue
            pos = next(iter(found))
            clash = any(
                len(s.arguments) == n
                and not any(a.is_out for a in s.arguments)
                and any(_is_tensor(s.arguments[i]) for i in pos)
                for s in schemas
            )
            if not clash:
                table.setdefault(name, {})[n] = pos
    return table


def test_every_entry_is_an_out_overload_of_the_installed_torch():
    for name, by_count in out_args.OUT_ARGS.items():
        try:
            schemas = torch._C._jit_get_schemas_for_operator(name)
        except RuntimeError:
            continue  # an op this torch does not have
        for n, pos in by_count.items():
            overloads = [s for s in schemas if len(s.arguments) == n]
            outs = [s for s in overloads if tuple(i for i, a in enumerate(s.arguments)
                                                  if a.is_out) == pos]  # fmt: skip
            assert outs, f"{name}: no out= overload with {n} arguments at {pos}"
            for s in overloads:
                if s not in outs:
                    assert not any(_is_tensor(s.arguments[i]) for i in pos), (name, n)


@pytest.mark.skipif(
    torch.__version__.split("+")[0] != out_args.DERIVED_FROM,
    reason=f"the table was derived from torch {out_args.DERIVED_FROM}",
)
def test_the_table_is_what_torch_says_for_the_ops_membound_costs():
    assert out_args.OUT_ARGS == _derive(registered())


BF = "c10::BFloat16"


@pytest.mark.parametrize(
    "op, dims, types, concrete, out_dims, out_type",
    [
        ("aten::mm", [[1024, 768], [768, 3072]], [BF, BF], None, [1024, 3072], BF),
        (
            "aten::addmm",
            [[3072], [1024, 768], [768, 3072], [], []],
            [BF, BF, BF, "Scalar", "Scalar"],
            ["", "", "", "1", "1"],
            [1024, 3072],
            BF,
        ),
        (
            "aten::gather",
            [[8, 1024, 503], [], [8, 1024, 1], []],
            ["float", "Scalar", "long int", "Scalar"],
            ["", "2", "", "False"],
            [8, 1024, 1],
            "float",
        ),
        ("aten::where", DIMS[:3], TYPES[:3], None, DIMS[3], "float"),
        ("aten::mul", [[4096, 64], [4096, 64]], [BF, BF], None, [4096, 64], BF),
        (
            "aten::mean",
            [[64, 512, 7], [], [], []],
            ["float", "ScalarList", "Scalar", ""],
            ["", "[2]", "False", ""],
            [64, 512],
            "float",
        ),
    ],
)
def test_an_out_call_costs_what_the_functional_call_costs(op, dims, types, concrete,
                                                            out_dims, out_type):  # fmt: skip
    """What inductor's extern kernels (`mm(a, b, out=buf)`) and aten's composites record:
    the same reads and writes as the call that returns a new tensor."""
    functional = cost_of(op, dims, types, concrete)
    out = cost_of(op, [*dims, out_dims], [*types, out_type], concrete and [*concrete, ""])
    assert functional.exact and out.exact
    assert (out.flops, out.bytes, out.read_bytes) == (
        functional.flops, functional.bytes, functional.read_bytes)  # fmt: skip
