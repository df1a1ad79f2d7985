"""Inductor kernels' reads and writes from the capture's parameter names (`kernel_args` in
capture.json) through the analysis: `pipeline.kernel_args_of` reads them, `join_calls` gives
them to the cost of each kernel of that name, and the HBM roof follows the share read.

The recorded fixture is tests/fixtures/h200_real_gpt2_compiled_run4: a torch.compile'd GPT-2
training loop on the H200 (`membound diagnose --wait 6 --warmup 2 --steps 3 --
examples/real/gpt2_compiled.py --steps 16 --warmup-steps 0`, 2026-12-03), whose meta names
the launch parameters of its 41 inductor kernels. Its ops pass records, for each of its 4332
inductor calls, exactly as many arguments as the kernel has launch parameters."""

from __future__ import annotations

import json
import lzma
import math

import numpy as np
import pytest

import membound.analysis.pipeline as pipeline
from membound.analysis import analyze
from membound.analysis.op_calls import call_column
from membound.analysis.ops import join_calls
from membound.analysis.pipeline import kernel_args_of
from membound.device.ceilings import Ceilings
from membound.trace.capture_meta import timeline_in
from membound.trace.load import load_trace
from support.paths import FIXTURES
from support.tracebuilder import TraceBuilder

RUN = FIXTURES / "h200_real_gpt2_compiled_run4"
CAST_ADD = "triton_poi_fused__to_copy_add_19"
#: the three kernels that pass a scratch workspace (`ws_ptr`), a name with no read/write role
WORKSPACE = {
    "triton_per_fused__to_copy_add_embedding_dense_backward_native_layer_norm_"
    "native_layer_norm_backward_nll_loss_forward_view_16",
    "triton_per_fused__to_copy_add_native_layer_norm_backward_view_9",
    "triton_per_fused__to_copy_native_layer_norm_backward_view_1",
}
#: bytes per element of the dtypes the profiler names, for the hand counts
ITEMSIZE = {"c10::BFloat16": 2, "float": 4}


def _analysed(meta=None):
    """The fixture analysed with the H200 ceilings, and the op calls the pipeline joined (the
    return of its `join_calls`, kept by a wrapper). `meta` replaces the capture meta."""
    ceil = Ceilings.load(FIXTURES / "h200_ceilings.json")
    kept = []

    def keep(*args, **kwargs):
        kept.append(join_calls(*args, **kwargs))
        return kept[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pipeline, "join_calls", keep)
        if meta is None:
            a = analyze([timeline_in(RUN)], ceil)
        else:
            ops = load_trace(RUN / "trace.ops.json.xz")
            a = pipeline.analyze_trace(load_trace(timeline_in(RUN)), ceil, meta, ops)
    (calls,) = kept
    return a, calls


@pytest.fixture(scope="module")
def meta():
    return json.loads((RUN / "capture.json").read_text())


@pytest.fixture(scope="module")
def named():
    return _analysed()


@pytest.fixture(scope="module")
def unnamed(meta):
    return _analysed({k: v for k, v in meta.items() if k != "kernel_args"})


def _inductor(calls):
    names = call_column(calls, "name")
    ind = np.array([n.startswith("triton_") for n in names], dtype=bool)
    return names, ind, call_column(calls, "read_bytes"), call_column(calls, "bytes")


def test_the_recorded_arguments_are_the_named_parameters(meta):
    """The capture's assumption: the profiler records an inductor kernel's launch
    parameters (not its constexprs), one argument each, in order."""
    events = json.loads(lzma.decompress((RUN / "trace.ops.json.xz").read_bytes()))["traceEvents"]
    calls = [e for e in events if e.get("cat") == "cpu_op" and e["name"].startswith("triton_")]
    assert len(calls) == 4332 and len({e["name"] for e in calls}) == 41
    table = meta["kernel_args"]
    assert all(len(e["args"]["Input Dims"]) == len(table[e["name"]]) for e in calls)


def test_the_cast_add_reads_six_of_its_ten_bytes_per_element(named, meta):
    """The tied embedding's gradient: bf16 lm_head grad (in_ptr0) + fp32 embedding grad
    (in_ptr1) -> fp32 (out_ptr0), [50304, 768] each: 2 + 4 bytes read, 4 written per
    element, counted here from the recorded event and the parameter names."""
    events = json.loads(lzma.decompress((RUN / "trace.ops.json.xz").read_bytes()))["traceEvents"]
    args = next(e["args"] for e in events if e.get("name") == CAST_ADD)
    reads = writes = 0
    for param, dims, dtype in zip(meta["kernel_args"][CAST_ADD], args["Input Dims"],
                                  args["Input type"], strict=True):  # fmt: skip
        if dtype == "Scalar":
            continue
        nbytes = math.prod(dims) * ITEMSIZE[dtype]
        reads += nbytes if param.startswith("in_ptr") else 0
        writes += nbytes if param.startswith("out_ptr") else 0
    n = 50304 * 768
    assert (reads, writes) == (6 * n, 4 * n)
    a, calls = named
    names, _, read, nbytes = _inductor(calls)
    mine = names == CAST_ADD
    assert mine.sum() == 12  # 3 steps x 4 micro-batches
    assert set(nbytes[mine].tolist()) == {reads + writes}
    assert set((read[mine] / nbytes[mine]).tolist()) == {0.6}


def test_every_kernel_but_the_workspace_ones_gets_a_split(named, unnamed):
    """4032 of the 4332 inductor calls (38 kernels) are split; the 300 calls of the three
    kernels that pass `ws_ptr` keep the trace's count. Without the meta's names none is."""
    _, calls = named
    names, ind, read, _ = _inductor(calls)
    split = ind & ~np.isnan(read)
    assert (ind.sum(), split.sum()) == (4332, 4032)
    assert set(names[ind & ~split].tolist()) == WORKSPACE
    assert len(set(names[split].tolist())) == 38
    _, plain = unnamed
    names0, ind0, read0, _ = _inductor(plain)
    assert ind0.sum() == 4332 and np.isnan(read0[ind0]).all()


def test_an_in_place_gradient_counts_twice(named, unnamed):
    """GELU backward updates the [12, 1024, 3072] bf16 gradient in place (in_out_ptr0) from
    the [12288, 3072] bf16 activation: 3 tensors' bytes moved, not the 2 the trace alone
    shows; a kernel with no in_out_ptr costs what it did."""
    m = 12 * 1024 * 3072 * 2

    def per_call(calls, name):
        names, _, read, nbytes = _inductor(calls)
        sel = names == name
        return set(nbytes[sel].tolist()), set(read[sel].tolist())

    gelu = "triton_poi_fused_gelu_gelu_backward_view_6"
    assert per_call(named[1], gelu) == ({3.0 * m}, {2.0 * m})
    assert per_call(unnamed[1], gelu)[0] == {2.0 * m}
    assert per_call(named[1], CAST_ADD)[0] == per_call(unnamed[1], CAST_ADD)[0]


def test_the_costed_share_of_op_time_is_kept(named, unnamed):
    assert named[0].ops_costed_fraction >= 0.98
    assert named[0].ops_costed_fraction == pytest.approx(unnamed[0].ops_costed_fraction)


def test_only_a_table_of_names_is_used():
    assert kernel_args_of(None) is None and kernel_args_of({}) is None
    assert kernel_args_of({"kernel_args": [["in_ptr0"]]}) is None
    table = {"a": ["in_ptr0", "xnumel"], "b": ["in_ptr0", 3], "c": "in_ptr0", 4: ["out_ptr0"]}
    assert kernel_args_of({"kernel_args": table}) == {"a": ["in_ptr0", "xnumel"]}


def test_the_split_sets_the_hbm_roof(tmp_path):
    """A copy (1 read : 1 write) on a GPU whose 2 : 1 mix runs faster than its copy: with the
    names the call is held to the copy rate, without them to the best mixed rate, as for any
    call of unknown split (`roofline.hbm_rate`)."""
    n = 1 << 20
    b = TraceBuilder()
    for s in range(2):
        o = s * 1000.0
        b.step(s, o, 1000)
        b.op("triton_poi_fused_clone_0", o + 10, 30, [[n], [n], []],
             ["float", "float", "Scalar"], ["", "", str(n)])  # fmt: skip
        b.launch("triton_poi_fused_clone_0", o + 20, o + 100, 10.0)
    trace = b.write(tmp_path / "trace.json.gz")
    ceil = Ceilings(device="cuda", name="H", memory_bandwidth=4e12, read_mix_bandwidth=5e12,
                    flops={"fp32_vector": 6e13})  # fmt: skip
    (plain,) = analyze([trace], ceil).ops
    meta = {"kernel_args": {"triton_poi_fused_clone_0": ["in_ptr0", "out_ptr0", "xnumel"]}}
    (tmp_path / "capture.json").write_text(json.dumps(meta))
    (split,) = analyze([trace], ceil).ops
    assert split.bytes == plain.bytes == 2 * 2 * n * 4  # two calls, read and written
    assert plain.achieved_bandwidth_fraction == pytest.approx(n * 8 / 10e-6 / 5e12)
    assert split.achieved_bandwidth_fraction == pytest.approx(n * 8 / 10e-6 / 4e12)
