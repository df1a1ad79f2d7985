"""The `_foreach_*` family: TensorList parsing, formulas against hand counts, the lists'
dtypes from the kernels, and the SGD step of the H200 fixtures."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from membound.cost import CostCounter, cost_of, cost_of_event, parse_args
from membound.cost.call import TensorList, TensorMeta
from membound.cost.formulas.foreach import (
    BINARY,
    TERNARY,
    UNARY,
    kernel_dtypes,
    list_dtypes_of,
)
from membound.cost.formulas.pointwise import FLOPS_PER_ELEMENT
from membound.cost.trace_args import parse_tensor_list
from membound.trace.capture_meta import timeline_in
from membound.trace.files import open_trace
from support.paths import FIXTURES, H200_CEILINGS

# odd shapes: 369 + 341 + 15 elements
SHAPES = [[9, 41], [341], [3, 1, 5]]
STRIDES = [[41, 1], [1], [5, 5, 1]]
N = 9 * 41 + 341 + 3 * 5
L, S = "TensorList", "Scalar"
BF16 = "c10::BFloat16"


def fe(name, dims, types, concrete=None, strides=None, list_dtypes=BF16):
    return cost_of(
        f"aten::_foreach_{name}", dims, types, concrete, strides, list_dtypes=list_dtypes
    )


def assert_cost(got, flops, read, written):
    assert got.exact and got.assumed_dtype is None
    assert (got.flops, got.read_bytes, got.bytes) == (flops, read, read + written)
    assert got.compute == "fp32_vector"


# --- the formulas, against hand counts (bf16 lists: 2 bytes an element) ------------------


def test_binary_list_list_in_place_reads_both_and_writes_self():
    # torch._foreach_add_(params, grads, alpha=-0.01): read self + other, write self
    got = fe("add_", [SHAPES, SHAPES, []], [L, L, S], ["", "", "-0.01"], [STRIDES, STRIDES, []])
    assert_cost(got, N, 2 * 2 * N, 2 * N)
    assert got.family == "foreach"


@pytest.mark.parametrize("op", ["sub_", "mul_", "div_", "maximum_", "pow_"])
def test_every_binary_in_place_op_moves_the_same(op):
    assert_cost(fe(op, [SHAPES, SHAPES], [L, L]), N, 4 * N, 2 * N)


def test_binary_list_scalar_and_out_of_place():
    # _foreach_mul_(grads, 0.9): read and write self; _foreach_mul(grads, 0.9): a new list
    assert_cost(fe("mul_", [SHAPES, []], [L, S], ["", "0.9"]), N, 2 * N, 2 * N)
    assert_cost(fe("mul", [SHAPES, []], [L, S], ["", "0.9"]), N, 2 * N, 2 * N)
    # list-list out of place: both read, one new tensor per element
    assert_cost(fe("add", [SHAPES, SHAPES, []], [L, L, S], ["", "", "1"]), N, 4 * N, 2 * N)
    # _foreach_pow(2.0, exponents): the list comes second
    assert_cost(fe("pow", [[], SHAPES], [S, L], ["2.", ""]), N, 2 * N, 2 * N)


def test_tensor_scalar_is_read_once():
    # clip_grad_norm_'s _foreach_mul_(grads, clip_coef): a 0-dim fp32 tensor, read once
    got = fe("mul_", [SHAPES, []], [L, "float"], ["", ""])
    assert_cost(got, N, 2 * N + 4, 2 * N)


def test_out_list_is_written_not_read():
    # _foreach_add.List_out(self, other, *, out): the third list is the out= buffer
    assert_cost(fe("add", [SHAPES, SHAPES, SHAPES], [L, L, L]), N, 4 * N, 2 * N)
    # _foreach_mul.Scalar_out(self, scalar, *, out): a list after the scalar is out=
    assert_cost(fe("mul", [SHAPES, [], SHAPES], [L, S, L], ["", "0.5", ""]), N, 2 * N, 2 * N)


def test_expanded_element_costs_its_storage():
    # other[0] is a [41] row expanded to [9, 41] (stride 0): 41 elements stored, not 369
    other_strides = [[0, 1], [1], [5, 5, 1]]
    got = fe("add_", [SHAPES, SHAPES], [L, L], strides=[STRIDES, other_strides])
    assert_cost(got, N, 2 * (N + N - 9 * 41 + 41), 2 * N)


def test_out_of_place_broadcasts_each_pair():
    # the slow path broadcasts: [9, 41] + [41] -> [9, 41]
    got = fe("add", [[[9, 41], [7]], [[41], [7]]], [L, L])
    assert_cost(got, 9 * 41 + 7, 2 * (9 * 41 + 41 + 7 + 7), 2 * (9 * 41 + 7))


@pytest.mark.parametrize("op", ["sqrt", "neg", "exp", "reciprocal", "sigmoid"])
def test_unary(op):
    per = FLOPS_PER_ELEMENT[op]
    assert_cost(fe(op, [SHAPES], [L]), per * N, 2 * N, 2 * N)
    assert_cost(fe(op + "_", [SHAPES], [L]), per * N, 2 * N, 2 * N)


def test_addcmul_addcdiv_lerp():
    # Adam's exp_avg_sq.addcmul_(grad, grad, value=1 - beta2): 3 lists read, self written;
    # 3 FLOPs an element as aten::addcmul (value * t1 * t2 + self)
    three = [SHAPES, SHAPES, SHAPES, []]
    for op in ("addcmul_", "addcdiv_"):
        assert_cost(fe(op, three, [L, L, L, S], ["", "", "", "0.5"]), 3 * N, 6 * N, 2 * N)
    # lerp_(self, end, weight): 2 lists and a scalar; 3 FLOPs (self + w * (end - self))
    got = fe("lerp_", [SHAPES, SHAPES, []], [L, L, S], ["", "", "0.1"])
    assert_cost(got, 3 * N, 4 * N, 2 * N)
    # lerp_(self, end, weights): 3 lists
    assert_cost(fe("lerp_", [SHAPES, SHAPES, SHAPES], [L, L, L]), 3 * N, 6 * N, 2 * N)
    assert FLOPS_PER_ELEMENT["addcmul"] == FLOPS_PER_ELEMENT["lerp"] == 3


def test_norm_and_max_write_one_scalar_per_tensor():
    got = fe("norm", [SHAPES, [], []], [L, S, ""], ["", "2.", ""])
    assert_cost(got, 2 * N, 2 * N, 3 * 2)
    # dtype=torch.float32 (recorded as its ScalarType code): fp32 norms of bf16 tensors
    got = fe("norm", [SHAPES, [], []], [L, S, S], ["", "2.", "6"])
    assert_cost(got, 2 * N, 2 * N, 3 * 4)
    assert_cost(fe("max", [SHAPES], [L]), N, 2 * N, 3 * 2)


def test_zero_and_copy():
    got = fe("zero_", [SHAPES], [L])
    assert_cost(got, 0, 0, 2 * N)
    assert got.family == "fill"
    # copy_(self, src): src read, self written (not read)
    assert_cost(fe("copy_", [SHAPES, SHAPES, []], [L, L, S], ["", "", "False"]), 0, 2 * N, 2 * N)
    # fp32 master weights copied into bf16 params: (self, src) dtypes as a copy kernel names
    got = fe("copy_", [SHAPES, SHAPES, []], [L, L, S], list_dtypes=("bfloat16", "float32"))
    assert_cost(got, 0, 4 * N, 2 * N)


def test_every_listed_op_is_registered_with_the_pointwise_count():
    for op in BINARY + UNARY + TERNARY:
        assert op in FLOPS_PER_ELEMENT
        for name in (op, op + "_"):
            assert cost_of(f"aten::_foreach_{name}", [[[5]], [[5]], [[5]]], [L, L, L]).family
    assert cost_of("aten::_foreach_lgamma_", [[[5]]], [L]).family == "unknown"


# --- dtypes ------------------------------------------------------------------------------


def test_without_a_dtype_the_cost_says_float32_was_assumed():
    got = fe("add_", [SHAPES, SHAPES, []], [L, L, S], ["", "", "1"], list_dtypes=None)
    assert not got.exact and got.assumed_dtype == "float32"
    assert (got.flops, got.bytes, got.family) == (N, 3 * 4 * N, "foreach")
    # one list known, one not: still assumed
    got = fe("copy_", [SHAPES, SHAPES], [L, L], list_dtypes=["bfloat16", None])
    assert not got.exact and got.assumed_dtype == "float32"
    # a sum rests on its parts' assumptions
    assert (got + got).assumed_dtype == "float32" and not (got + got).exact


def test_live_costs_are_exact_and_match_the_trace_with_the_dtype():
    ps = [torch.randn(s, dtype=torch.bfloat16) for s in SHAPES]
    gs = [torch.randn_like(p) for p in ps]
    with CostCounter() as c:
        torch._foreach_add_(ps, gs, alpha=-0.01)
        norms = torch._foreach_norm(ps)
        outs = torch._foreach_mul(gs, 0.5)
        torch._foreach_lerp_(ps, gs, 0.3)
    assert len(norms) == len(outs) == 3
    live = {r.name: r.cost for r in c.records}
    post = {
        "aten::_foreach_add_": fe("add_", [SHAPES, SHAPES, []], [L, L, S], ["", "", "-0.01"]),
        "aten::_foreach_norm": fe("norm", [SHAPES, [], []], [L, S, ""], ["", "2.", ""]),
        "aten::_foreach_mul": fe("mul", [SHAPES, []], [L, S], ["", "0.5"]),
        "aten::_foreach_lerp_": fe("lerp_", [SHAPES, SHAPES, []], [L, L, S], ["", "", "0.3"]),
    }
    assert live == post
    assert all(cost.exact for cost in live.values())


def test_live_duplicate_list_is_read_once():
    ps = [torch.randn(s) for s in SHAPES]
    with CostCounter() as c:
        torch._foreach_add_(ps, ps)
    assert_cost(c.records[0].cost, N, 4 * N, 4 * N)


NS = "at::native::(anonymous namespace)::"


def mta(depth: int, functor: str, rest: str) -> str:
    """A multi_tensor_apply kernel's name, as the profiler records it."""
    args = f"{NS}TensorListMetadata<{depth}>, {functor}, {rest}"
    return f"void {NS}multi_tensor_apply_kernel<{args}>({args})"


# the kernels of h200_planted_pageable, h200_small_block and h200_real_gpt2, and a copy's
ADD_FP32 = mta(2, NS + "BinaryOpListAlphaFunctor<float, 2, 2, 0>", "std::plus<float>, float")
ADD_BF16 = mta(
    2, NS + "BinaryOpListAlphaFunctor<c10::BFloat16, 2, 2, 0>", "std::plus<float>, float"
)
NORM = mta(
    1, "at::native::LpNormFunctor<float, (at::native::NormType)1, float, 1, 1, 0>", "float*, int"
)
COPY = mta(2, NS + "CopyFunctor<c10::BFloat16, float, 2, 1, 1>", "at::native::Copy<float, float> ")
ELEMENTWISE = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"
)


def test_kernel_names_state_the_lists_dtype():
    assert kernel_dtypes(ADD_FP32) == ("float32",)
    assert kernel_dtypes(ADD_BF16) == ("bfloat16",)
    assert kernel_dtypes(NORM) == ("float32",)
    assert kernel_dtypes(COPY) == ("bfloat16", "float32")
    assert kernel_dtypes(ELEMENTWISE) is None  # a FillFunctor, not a multi_tensor_apply
    assert kernel_dtypes(ADD_BF16[:120]) is None  # truncated before the functor's arguments
    assert list_dtypes_of("aten::_foreach_add_", [ADD_BF16, ADD_BF16, ELEMENTWISE]) == "bfloat16"
    assert list_dtypes_of("aten::_foreach_copy_", [COPY]) == ("bfloat16", "float32", "bfloat16")
    assert list_dtypes_of("aten::_foreach_add_", [ADD_FP32, ADD_BF16]) is None  # disagree
    assert list_dtypes_of("aten::_foreach_add_", [ELEMENTWISE]) is None  # the slow path


# --- parsing -----------------------------------------------------------------------------

# "Input ..." of torch._foreach_add_(params, grads, alpha=-0.01) in h200_planted_pageable,
# as text
RECORDED = {
    "Input type": "['TensorList', 'TensorList', 'Scalar']",
    "Input Dims": "[[[256, 150528], [256], [256], [256], [10, 256], [10]], "
    "[[256, 150528], [256], [256], [256], [10, 256], [10]], []]",
    "Input Strides": "[[[150528, 1], [1], [1], [1], [256, 1], [1]], "
    "[[150528, 1], [1], [1], [1], [256, 1], [1]], []]",
    "Concrete Inputs": "['', '', '-0.01']",
}
PLANTED = [[256, 150528], [256], [256], [256], [10, 256], [10]]
PLANTED_N = 256 * 150528 + 3 * 256 + 10 * 256 + 10


def test_recorded_strings_parse():
    self_, other, alpha = parse_args(
        *(json.loads(RECORDED[k].replace("'", '"')) for k in ("Input Dims", "Input type")),
        ["", "", "-0.01"],
    )
    assert isinstance(self_, TensorList) and not self_.dtype_known and self_.readable
    assert [t.shape for t in self_] == [tuple(s) for s in PLANTED] and self_ == other
    assert alpha == pytest.approx(-0.01)
    got = cost_of_event("aten::_foreach_add_", RECORDED, list_dtypes="float")
    assert_cost(got, PLANTED_N, 2 * 4 * PLANTED_N, 4 * PLANTED_N)
    assert got.bytes == 462_462_072


def test_tensor_list_parsing_edges():
    assert parse_tensor_list([]) == [] and parse_tensor_list([]).readable
    # 0-dim tensors in a list (Adam's state_steps): one element each
    steps = parse_tensor_list([[], []], [[], []], "float32")
    assert steps == [TensorMeta(()), TensorMeta(())] and steps.dtype_known
    # strides that do not fit are ignored (dense), not fatal
    assert parse_tensor_list([[2, 3]], "x")[0].extent == 6
    assert parse_tensor_list([[2, 3]], [[0, 1], [1]])[0].extent == 6
    for bad in ("[[2, 3]]", 5, None, [[2, "x"]], [[2, -1]], [[[2]]], [2, 3], [[2.5]]):
        got = parse_tensor_list(bad)
        assert not got.readable and got == []


MALFORMED = [
    # (Input Dims, Input type): a long list recorded without shapes (h200_real_gpt2) ...
    ([[], [], []], [L, L, S]),
    ([[], []], [L, S]),
    # ... shapes that are not shapes, lists of unequal length, nothing at all
    ("garbage", [L, L, S]),
    ([[[2, "x"]], [[2]]], [L, L]),
    ([[[2, -3]], [[2]]], [L, L]),
    ([[[[2]]], [[2]]], [L, L]),
    ([[2, 3], [[2, 3]]], [L, L]),
    ([[[2], [3]], [[2]]], [L, L]),
    ([], []),
    (None, None),
    ("[[[2]], [[2]]", "['TensorList',"),
]


@pytest.mark.parametrize(("dims", "types"), MALFORMED)
def test_malformed_input_stays_uncosted_without_raising(dims, types):
    args = {"Input Dims": dims, "Input type": types, "Concrete Inputs": "['', '"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nor a warning: an uncostable op is not an error
        for op in ("aten::_foreach_add_", "aten::_foreach_norm", "aten::_foreach_zero_"):
            for dtypes in (None, "float"):
                got = cost_of_event(op, args, list_dtypes=dtypes)
                assert not got.exact and got.family == "unknown"


# --- the H200 fixtures' SGD step ---------------------------------------------------------

# per fixture: the params of its `torch._foreach_add_(params, grads, alpha=-lr)` and their
# dtype: examples/planted/small_block.py (bf16 Linear(1024, 4096), LayerNorm(4096),
# Linear(4096, 1024)) and host_sync.py (12 bf16 Linear(2048, 2048)); planted_pageable's fp32
# MLP (Linear(150528, 256), LayerNorm(256), Linear(256, 10)) ran in the analysis GPU run
SGD = {
    "h200_planted_pageable": (PLANTED, "float32"),
    "h200_small_block": (
        [[4096, 1024], [4096], [4096], [4096], [1024, 4096], [1024]],
        "bfloat16",
    ),
    "h200_host_sync": ([[2048, 2048], [2048]] * 12, "bfloat16"),
}


def _foreach_calls(scenario: str):
    """Each `_foreach_add_` event of a fixture with the names of the kernels it launched,
    joined here from the raw events: the runtime launches inside the op's span on its
    thread, then the kernels of their correlation ids."""
    with open_trace(timeline_in(FIXTURES / scenario)) as fh:
        events = json.load(fh)["traceEvents"]
    ops = [e for e in events if e.get("cat") == "cpu_op" and e["name"] == "aten::_foreach_add_"]
    launches = [e for e in events if e.get("cat") == "cuda_runtime"]
    kernels: dict[int, list[str]] = {}
    for e in events:
        if e.get("cat") == "kernel":
            kernels.setdefault(e["args"]["correlation"], []).append(e["name"])
    for op in ops:
        inside = [
            r["args"]["correlation"]
            for r in launches
            if r["tid"] == op["tid"] and op["ts"] <= r["ts"] <= op["ts"] + op["dur"]
        ]
        yield op, [k for c in inside for k in kernels.get(c, [])]


@pytest.mark.parametrize("scenario", sorted(SGD))
def test_fixture_sgd_step_costs_the_kernels_dtype_exactly(scenario):
    params, dtype = SGD[scenario]
    size = {"float32": 4, "bfloat16": 2}[dtype]
    elements = sum(torch.Size(s).numel() for s in params)
    calls = list(_foreach_calls(scenario))
    assert calls
    for op, kernel_names in calls:
        assert list_dtypes_of(op["name"], kernel_names) == dtype
        got = cost_of_event(op["name"], op["args"], list_dtypes=dtype)
        # in place: read self and other, write self; one add per element (alpha fused)
        assert_cost(got, elements, 2 * size * elements, size * elements)
        # the trace alone does not say the dtype: the assumed-float32 cost is not exact
        assumed = cost_of_event(op["name"], op["args"])
        assert not assumed.exact and assumed.bytes == 3 * 4 * elements


@pytest.mark.parametrize("scenario", sorted(SGD))
def test_fixture_costed_fraction_reaches_98_percent(scenario):
    from membound.analysis import analyze
    from membound.device.ceilings import Ceilings

    a = analyze(timeline_in(FIXTURES / scenario), Ceilings.load(H200_CEILINGS))
    assert a.ops_costed_fraction >= 0.98
    (row,) = [r for r in a.ops if r.name == "aten::_foreach_add_"]
    params, dtype = SGD[scenario]
    size = {"float32": 4, "bfloat16": 2}[dtype]
    elements = sum(torch.Size(s).numel() for s in params)
    assert row.exact_cost and row.bytes == row.calls * 3 * size * elements
