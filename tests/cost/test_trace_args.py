"""Parsing of the argument formats a kineto trace records (record_shapes=True)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import torch

from membound.cost import TensorMeta, parse_args
from membound.cost.call import storage_extent
from membound.cost.trace_args import cost_of, parse_concrete
from membound.dtypes import ITEMSIZE, SCALAR_TYPE_CODES, as_dtype, trace_dtype

FIXTURE = json.loads(gzip.decompress((Path(__file__).parent / "trace_args.json.gz").read_bytes()))

# the "Input type" strings torch's profiler prints, one per dtype (recorded on torch 2.13)
PROFILER_TYPES = {
    "float": torch.float32,
    "double": torch.float64,
    "c10::Half": torch.float16,
    "c10::BFloat16": torch.bfloat16,
    "signed char": torch.int8,
    "unsigned char": torch.uint8,
    "short int": torch.int16,
    "int": torch.int32,
    "long int": torch.int64,
    "bool": torch.bool,
    "c10::complex<float>": torch.complex64,
    "c10::complex<double>": torch.complex128,
    "c10::Float8_e4m3fn": torch.float8_e4m3fn,
    "c10::Float8_e5m2": torch.float8_e5m2,
}


@pytest.mark.parametrize("type_name,dtype", sorted(PROFILER_TYPES.items(), key=str))
def test_trace_dtype_names_and_sizes(type_name, dtype):
    name = trace_dtype(type_name)
    assert name == str(dtype).removeprefix("torch.")
    assert ITEMSIZE[name] == dtype.itemsize


def test_non_tensor_types_are_not_dtypes():
    for t in ("Scalar", "ScalarList", "TensorList", "GenericList", ""):
        assert trace_dtype(t) is None


def test_scalar_type_codes_match_torch():
    # the profiler prints a ScalarType argument as its enum value, e.g. "6" for float32
    for code, name in SCALAR_TYPE_CODES.items():
        if hasattr(torch, name):
            assert as_dtype(code) == name
    assert as_dtype(6) == "float32" and as_dtype(15) == "bfloat16" and as_dtype(5) == "float16"
    assert as_dtype(torch.bfloat16) == "bfloat16" and as_dtype(None, "x") == "x"


@pytest.mark.parametrize(
    "text,value",
    [
        ("", None),
        ("-1", -1),
        ("0.10000000000000001", 0.1),
        ("0.", 0.0),
        ("1.0000000000000001e-05", 1e-05),
        ("[128]", [128]),
        ("[1, 1]", [1, 1]),
        ("[]", []),
        ("[True, True, False]", [True, True, False]),
        ("True", True),
        ("False", False),
        ("cuda:0", "cuda:0"),
    ],
)
def test_parse_concrete(text, value):
    assert parse_concrete(text) == value
    assert type(parse_concrete(text)) is type(value)


def test_parse_concrete_lists_are_fresh_copies():
    a = parse_concrete("[4, 5]")
    a.append(6)
    assert parse_concrete("[4, 5]") == [4, 5]


def test_parse_args_from_real_events():
    events: dict = {}
    for scenario in ("mlp", "assorted"):
        for e in FIXTURE["scenarios"][scenario]:
            events.setdefault(e["name"], e["args"])  # first occurrence
    a = events["aten::addmm"]
    args = parse_args(a["Input Dims"], a["Input type"], a["Concrete Inputs"], a["Input Strides"])
    assert args[:3] == [TensorMeta((128,), "float32"), TensorMeta((32, 64)), TensorMeta((64, 128))]
    assert args[3:] == [1, 1]
    ln = events["aten::native_layer_norm"]
    args = parse_args(ln["Input Dims"], ln["Input type"], ln["Concrete Inputs"])
    assert args[1] == [128] and args[4] == pytest.approx(1e-5)
    cat = events["aten::cat"]
    args = parse_args(cat["Input Dims"], cat["Input type"], cat["Concrete Inputs"])
    assert args == [[TensorMeta((32, 128)), TensorMeta((32, 128))], 0]
    emb = events["aten::embedding"]
    args = parse_args(emb["Input Dims"], emb["Input type"], emb["Concrete Inputs"])
    assert args[1] == TensorMeta((4, 7), "int64") and args[2:] == [-1, False, False]


def test_wrapped_number_costs_nothing_but_self_does():
    # x * 2.0 is recorded as mul(Tensor, 0-dim double tensor)
    x, two = parse_args([[3, 4], []], ["float", "double"], ["", ""])
    assert x.nbytes == 48 and two.shape == () and two.nbytes == 0
    # a real 0-dim int64 tensor as self (num_batches_tracked.add_(1)) is counted
    (counter, one) = parse_args([[], []], ["long int", "long int"], ["", ""])
    assert counter.nbytes == 8 and one.nbytes == 0


def test_storage_extent_of_broadcast_views():
    assert storage_extent((32, 128), (0, 1)) == 128
    assert storage_extent((32, 128), (128, 1)) == 4096
    assert storage_extent((32, 128), (1, 32)) == 4096  # transposed: dense
    assert storage_extent((32, 128), (0, 0)) == 1
    assert storage_extent((4, 4), (8, 1)) == 16  # sliced rows: the elements, not the gaps
    (t,) = parse_args([[32, 128]], ["c10::Half"], [""], [[0, 1]])
    assert t.nbytes == 2 * 128


@pytest.mark.parametrize(
    "spelling,name",
    [
        ("c10::BFloat16", "bfloat16"),
        ("torch.bfloat16", "bfloat16"),
        ("bfloat16", "bfloat16"),
        ("float", "float32"),
        ("half", "float16"),
        ("c10::Half", "float16"),
        ("double", "float64"),
        ("long int", "int64"),
        ("torch.float8_e4m3fn", "float8_e4m3fn"),
        ("Scalar", None),
        ("", None),
    ],
)
def test_canonical_reads_every_spelling(spelling, name):
    from membound.dtypes import canonical

    assert canonical(spelling) == name


def test_probed_float_takes_the_three_floats_the_probes_run_and_nothing_else():
    from membound.dtypes import probed_float

    assert [probed_float(t) for t in ("float", "c10::BFloat16", "c10::Half")] == [
        "float32", "bfloat16", "float16",
    ]  # fmt: skip
    assert [probed_float(t) for t in ("double", "long int", "Scalar", "", None, 3)] == [None] * 6


def test_min_and_max_of_two_tensors_are_elementwise():
    """`torch.min(a, b)` (aten::min.other; HF T5's relative position buckets on two int64
    512 x 512 tensors, recorded on the H200) is elementwise: read both, write one, one op a
    element. It was costed as a reduction whose second argument is its dims, which raised."""
    c = cost_of("aten::min", [[512, 512], [512, 512]], ["long int", "long int"], ["", ""])
    assert c.exact and c.flops == 512 * 512
    assert c.bytes == 3 * 512 * 512 * 8 and c.read_bytes == 2 * 512 * 512 * 8
    # broadcast: a row against a matrix reads the row once
    c = cost_of("aten::max", [[64, 32], [32]], ["float", "float"], ["", ""])
    assert c.bytes == (64 * 32 * 2 + 32) * 4
    # the reductions are unchanged: max over a dim writes values and indices
    c = cost_of("aten::max", [[4, 6], [], []], ["float", "Scalar", "Scalar"], ["", "1", "False"])
    assert c.flops == 24 and c.bytes == 4 * 24 + 4 * 4 + 8 * 4


def test_isneginf_is_a_costed_pointwise_op():
    """`aten::isneginf` (torch's `_safe_softmax`, inside the math path of
    scaled_dot_product_attention) had no formula: its kernels walked up to the SDPA call,
    whose formula counts the whole attention, and placed it at 373% of its roof on the
    recorded H200 T5. Read one, write a bool, one op a element."""
    for op in ("aten::isneginf", "aten::isposinf"):
        c = cost_of(op, [[16, 8, 512, 512]], ["float"], [""])
        n = 16 * 8 * 512 * 512
        assert c.exact and c.flops == n and c.bytes == n * 4 + n * 1
