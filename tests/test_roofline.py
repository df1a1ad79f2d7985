"""Placing work on the roofline, and `measure` on a real function."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

import membound.roofline as R
from membound.device.ceilings import Ceilings
from membound.errors import BadInput

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


def test_matmul_compute_key_reads_torch_setting(monkeypatch):
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", True)
    assert R.matmul_compute_key(torch.float32) == "tf32"


def test_measure_aggregates_per_op_per_call(monkeypatch):
    """With a stub cost model: rows per op name, figures per call of fn, slowest first."""
    costs = {
        "aten::mm": (2 * 64**3, 3 * 64 * 64 * 4, "fp32", "matmul"),
        "aten::add": (64 * 64, 3 * 64 * 64 * 4, "fp32_vector", "pointwise"),
    }

    def fake_cost(e):
        if e.name not in costs:
            return None
        f, b, c, fam = costs[e.name]
        return SimpleNamespace(flops=f, bytes=b, compute=c, family=fam, exact=True)

    monkeypatch.setattr(R, "_cost", fake_cost)
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
    pts = table.points()
    assert {p["label"] for p in pts} == {"mm", "add"}
    fig = table.plot()
    assert len(fig.axes[0].collections) == 2  # one marker per op


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
    assert 0.2 < top.placement.achieved_bandwidth_fraction < 1.5


def _event(name, shapes, dtypes, device_us):
    return SimpleNamespace(
        name=name,
        device_type="DeviceType.CPU",
        self_device_time_total=device_us,
        input_shapes=shapes,
        input_dtypes=dtypes,
        concrete_inputs=[None] * len(shapes),
        cpu_children=[],
        cpu_parent=None,
    )


def test_cuda_path_on_recorded_events():
    """The CUDA branch (device-time owners) on events shaped like the profiler's, no GPU needed:
    a wrapper without device time is ignored, fp32 matmuls use the TF32 roof when allowed."""
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
    events = [
        _event("aten::layer_norm", [[32768, 4096], [], [4096], [4096], [], []], ["float"] * 6, 0.0),
        _event(
            "aten::native_layer_norm",
            [[32768, 4096], [], [4096], [4096], []],
            ["float", "", "float", "float", "Scalar"],
            265.0,
        ),
        _event("aten::mm", [[4096, 4096], [4096, 4096]], ["float", "float"], 1000.0),
    ] * R.RUNS  # what RUNS profiled calls of fn record
    table = R._aggregate(R._device_owners(events), ceil, "cuda", allow_tf32=True)
    assert [r.name for r in table.rows] == ["aten::mm", "aten::native_layer_norm"]
    ln = table.row("aten::native_layer_norm")
    assert ln.calls == 1 and ln.device_ms == pytest.approx(0.265)
    assert ln.bound == "memory"
    assert ln.bytes >= 2 * n * 4  # reads x, writes y at least
    assert 0.9 < ln.placement.achieved_bandwidth_fraction < 1.1  # 1.07 GB in 0.265 ms at 4 TB/s
    mm = table.row("aten::mm")
    assert mm.compute == "tf32" and mm.bound == "compute"
    assert (
        R._aggregate(R._device_owners(events), ceil, "cuda", allow_tf32=False)
        .row("aten::mm")
        .compute
        == "fp32"
    )
