"""Placing work on the roofline, and `measure` on a real function."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import membound.roofline as R
from membound.device.ceilings import Ceilings
from membound.errors import BadInput
from membound.trace.load import load_trace
from membound.trace.model import Trace

# a toy device: 1 TB/s, 100 TFLOP/s bf16, 10 TFLOP/s fp32 -> ridges 100 and 10 FLOP/byte
CEIL = Ceilings(
    device="cuda", name="toy", memory_bandwidth=1e12, flops={"bf16": 1e14, "fp32": 1e13}
)


def test_memory_bound_left_of_ridge():
    # 1 GB moved, 1 GFLOP: intensity 1 < ridge 100; roof time = 1 ms; took 2 ms
    p = R.place(1e9, 1e9, 2e-3, CEIL, "bf16")
    assert p.intensity == pytest.approx(1.0)
    assert p.bound == "memory"
    assert p.attainable_seconds == pytest.approx(1e-3)
    assert p.fraction == pytest.approx(0.5)
    assert p.achieved_bandwidth == pytest.approx(5e11)
    assert p.achieved_bandwidth_fraction == pytest.approx(0.5)
    assert p.achieved_flops_fraction == pytest.approx(5e11 / 1e14)
    assert p.ridge == pytest.approx(100)


def test_compute_bound_right_of_ridge_depends_on_dtype():
    # intensity 50: compute-bound against fp32 (ridge 10), memory-bound against bf16 (ridge 100)
    fp32 = R.place(5e10, 1e9, 10e-3, CEIL, "fp32")
    bf16 = R.place(5e10, 1e9, 10e-3, CEIL, "bf16")
    assert fp32.bound == "compute" and bf16.bound == "memory"
    assert fp32.attainable_seconds == pytest.approx(5e-3)  # 5e10 / 1e13
    assert bf16.attainable_seconds == pytest.approx(1e-3)  # bytes / bandwidth
    assert fp32.fraction == pytest.approx(0.5)


def test_faster_than_the_roof_is_capped_at_one():
    p = R.place(0, 1e9, 0.5e-3, CEIL, None)  # e.g. data resident in L2
    assert p.fraction == 1.0 and p.achieved_bandwidth_fraction == pytest.approx(2.0)
    assert p.intensity == 0 and p.bound == "memory"


def test_no_bytes_is_infinitely_intense():
    p = R.place(1e9, 0, 1e-3, CEIL, "fp32")
    assert math.isinf(p.intensity) and p.bound == "compute"


@pytest.mark.parametrize("seconds", [0, -1.0, float("nan")])
def test_bad_time_is_bad_input(seconds):
    with pytest.raises(BadInput):
        R.place(1, 1, seconds, CEIL, "fp32")


@pytest.mark.parametrize(
    ("dtype", "tf32", "key"),
    [
        (torch.float32, False, "fp32"),
        (torch.float32, True, "tf32"),
        (torch.bfloat16, True, "bf16"),
        (torch.float16, False, "fp16"),
        ("c10::BFloat16", False, "bf16"),
        ("float", True, "tf32"),
        (torch.float64, True, "fp64"),
        (torch.float8_e4m3fn, False, "fp8"),
    ],
)
def test_matmul_compute_key(dtype, tf32, key):
    assert R.matmul_compute_key(dtype, tf32) == key


def test_matmul_compute_key_reads_torch_setting():
    # set and restore through torch's own setter: monkeypatch (pytest >= 9.2) treats this
    # module attribute as absent and tries to delete it at teardown
    matmul = torch.backends.cuda.matmul
    old = matmul.allow_tf32
    try:
        matmul.allow_tf32 = True
        assert R.matmul_compute_key(torch.float32) == "tf32"
        matmul.allow_tf32 = False
        assert R.matmul_compute_key(torch.float32) == "fp32"
    finally:
        matmul.allow_tf32 = old


def test_measure_aggregates_per_op_per_call(monkeypatch):
    """With a stub cost model: rows per op name, figures per call of fn, slowest first."""
    costs = {
        "aten::mm": (2 * 64**3, 3 * 64 * 64 * 4, "fp32", "matmul"),
        "aten::add": (64 * 64, 3 * 64 * 64 * 4, "fp32_vector", "pointwise"),
    }

    seen = []

    def fake_cost(name, dims, types, concrete, strides=None):
        seen.append((name, dims, types))
        if name not in costs:
            return None
        f, b, c, fam = costs[name]
        return SimpleNamespace(flops=f, bytes=b, compute=c, family=fam, exact=True)

    import membound.analysis.ops as ops

    # measure costs ops through the analysis' own join (membound.analysis.ops)
    monkeypatch.setattr(ops, "_cost_fn", lambda: fake_cost)
    a = torch.randn(64, 64)

    def fn(x):
        y = x @ x
        return (y + 1) + 2

    table = R.measure(fn, a, ceilings=CEIL)
    assert table.device == "cpu"
    mm, add = table.row("aten::mm"), table.row("aten::add")
    assert mm.calls == 1 and add.calls == 2  # per call of fn, over R.RUNS runs
    assert mm.flops == 2 * 64**3 and add.flops == 2 * 64 * 64
    assert mm.bound == "compute" and add.bound == "memory"
    assert [r.device_ms for r in table.rows] == sorted(
        (r.device_ms for r in table.rows), reverse=True
    )
    row = next(r for r in table.to_rows() if r["name"] == "aten::mm")
    for k in (
        "name",
        "calls",
        "device_ms",
        "flops",
        "bytes",
        "arithmetic_intensity",
        "bound",
        "achieved_bandwidth_fraction",
        "achieved_flops_fraction",
    ):
        assert k in row
    assert row["arithmetic_intensity"] == pytest.approx(2 * 64**3 / (3 * 64 * 64 * 4))
    # one definition of the JSON `ops` row: measure's rows are the report's rows
    from membound.analysis.result import OpRow

    assert row == next(r for r in table.rows if r.name == "aten::mm").to_dict()
    assert isinstance(table.rows[0], OpRow)
    pts = table.points()
    assert {p["label"] for p in pts} == {"mm", "add"}
    fig = table.plot()
    assert len(fig.axes[0].collections) == 2  # one marker per op
    # shapes and dtypes came from the exported trace file, as `membound analyze` reads them
    assert ("aten::mm", [[64, 64], [64, 64]], ["float", "float"]) in seen


def test_measure_with_the_real_cost_model():
    import membound.cost

    if not hasattr(membound.cost, "cost_of"):
        pytest.skip("membound.cost.cost_of is not exported yet")
    ceil = Ceilings(
        device="cpu", name="toy", memory_bandwidth=2e10, flops={"fp32": 1e11}
    )  # ridge 5
    a = torch.randn(128, 128)
    table = R.measure(torch.mm, a, a, ceilings=ceil)
    mm = table.row("aten::mm")
    assert mm is not None and mm.flops == 2 * 128**3
    assert mm.bound == "compute"  # intensity 2*128^3 / (3*128*128*4) ~ 21 > 5


@pytest.mark.parametrize("device", ["meta", "not-a-device"])
def test_measure_rejects_other_devices(device):
    with pytest.raises(BadInput):
        R.measure(lambda: None, device=device, ceilings=CEIL)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_layernorm_is_memory_bound_on_gpu(dtype):
    from membound.device import get_ceilings

    ceil = get_ceilings("cuda", quick=True, progress=False)
    x = torch.randn(32768, 4096, device="cuda", dtype=dtype)
    w = torch.ones(4096, device="cuda", dtype=dtype)
    table = R.measure(torch.nn.functional.layer_norm, x, (4096,), w, w, ceilings=ceil)
    top = table.rows[0]
    assert "layer_norm" in top.name
    assert top.bound == "memory"
    assert 0.2 < top.achieved_bandwidth_fraction < 1.5


def test_measure_layer_norm_on_cpu_uses_the_trace_dtypes():
    """The CPU twin of the GPU layer-norm test: dtypes come from the trace's "Input type"
    (torch 2.11's FunctionEvent may lack `input_dtypes`, which left the op uncosted)."""
    import membound.cost

    if not hasattr(membound.cost, "cost_of"):
        pytest.skip("membound.cost.cost_of is not exported yet")
    ceil = Ceilings(device="cpu", name="toy", memory_bandwidth=2e10, flops={"fp32_vector": 1e11})
    x = torch.randn(256, 512)
    w = torch.ones(512)
    table = R.measure(torch.nn.functional.layer_norm, x, (512,), w, w, ceilings=ceil)
    top = table.rows[0]
    assert "layer_norm" in top.name
    assert top.bound == "memory"
    assert top.bytes >= 2 * 256 * 512 * 4  # reads x, writes y at least
    assert top.calls == 1


def _recorded(ln_us: float, mm_kernel: str) -> Trace:
    """A kineto trace of RUNS calls of fn = layer_norm then mm, as a CUDA profile records it:
    the wrapper aten::layer_norm encloses aten::native_layer_norm, which launches the kernel."""
    from support import tracebuilder

    b = tracebuilder.TraceBuilder()
    ln_dims = [[32768, 4096], [], [4096], [4096], []]
    ln_types = ["float", "", "float", "float", "Scalar"]
    for k in range(R.RUNS):
        o = k * 2000.0
        b.op("aten::layer_norm", o, 30, [[32768, 4096], [], [4096], [4096], [], []])
        b.op(
            "aten::native_layer_norm", o + 2, 25, ln_dims, ln_types, ["", "[4096]", "", "", "1e-05"]
        )
        b.launch("vectorized_layer_norm_kernel", o + 5, o + 40, ln_us)
        b.op("aten::mm", o + 40, 20, [[4096, 4096], [4096, 4096]], ["float", "float"])
        b.launch(mm_kernel, o + 45, o + 400, 1000.0)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.json"
        path.write_text(b.text())
        return load_trace(path)


def test_cuda_path_on_a_recorded_trace():
    """measure()'s CUDA branch (`table_from_trace` on the exported profile) without a GPU:
    kernels join the innermost costed op, fp32 matmuls use the TF32 roof when allowed or when
    their kernel's name says tensor cores."""
    import membound.cost

    if not hasattr(membound.cost, "cost_of"):
        pytest.skip("membound.cost.cost_of is not exported yet")
    ceil = Ceilings(
        device="cuda",
        name="toy",
        memory_bandwidth=4e12,
        flops={"fp32": 5e13, "tf32": 3.5e14, "fp32_vector": 6e13},
    )
    n = 32768 * 4096
    trace = _recorded(265.0, "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_ffma")
    table = R.table_from_trace(trace, ceil, "cuda", allow_tf32=True)
    assert [r.name for r in table.rows] == ["aten::mm", "aten::native_layer_norm"]
    ln = table.row("aten::native_layer_norm")
    assert ln.calls == 1 and ln.device_ms == pytest.approx(0.265)
    assert ln.bound == "memory" and ln.exact_cost
    assert ln.bytes >= 2 * n * 4  # reads x, writes y at least
    assert 0.9 < ln.achieved_bandwidth_fraction < 1.1  # 1.07 GB in 0.265 ms at 4 TB/s
    mm = table.row("aten::mm")
    assert mm.compute == "tf32" and mm.bound == "compute"
    assert (
        R.table_from_trace(trace, ceil, "cuda", allow_tf32=False).row("aten::mm").compute == "fp32"
    )
    # a tensor-core kernel name is evidence of TF32 whatever the flag says now
    tc = _recorded(265.0, "cutlass_80_tensorop_s1688gemm_tf32_256x128_nn")
    assert R.table_from_trace(tc, ceil, "cuda", allow_tf32=False).row("aten::mm").compute == "tf32"


def test_compiled_kernels_get_their_read_write_split_in_the_table():
    """`membound.roofline.measure` of a compiled function passes the launch parameter names of
    the inductor kernels this process compiled (`trace.kernel_args`) to the table, as
    diagnose's capture does. On the recorded compiled GPT-2 ops pass (H200, names from its
    capture.json): GELU backward updates its [12, 1024, 3072] bf16 gradient in place
    (in_out_ptr0) from the bf16 activation: 3 tensors' bytes a call with the names, the 2 the
    trace alone shows without them."""
    import json

    from support.paths import FIXTURES

    run = FIXTURES / "h200_real_gpt2_compiled_run4"
    names = json.loads((run / "capture.json").read_text())["kernel_args"]
    trace = load_trace(run / "trace.ops.json.xz")
    ceil = Ceilings.load(FIXTURES / "h200_ceilings.json")
    gelu = "triton_poi_fused_gelu_gelu_backward_view_6"
    plain = R.table_from_trace(trace, ceil, "cuda", allow_tf32=True).row(gelu)
    split = R.table_from_trace(trace, ceil, "cuda", allow_tf32=True, kernel_args=names).row(gelu)
    m = 12 * 1024 * 3072 * 2
    # rows are per `RUNS` runs of the function: per call, the hand counts
    assert plain.bytes / plain.calls == pytest.approx(2 * m)
    assert split.bytes / split.calls == pytest.approx(3 * m)
    assert split.device_ms == pytest.approx(plain.device_ms)
    assert split.achieved_bandwidth_fraction == pytest.approx(
        1.5 * plain.achieved_bandwidth_fraction, rel=0.05
    )
