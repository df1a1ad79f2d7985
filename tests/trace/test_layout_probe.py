"""`trace.layout_probe`: the trace's NCHW interpolations timed again in channels_last after
diagnose's script, and `memory-bound-op` on an interpolation predicting channels_last from
that measurement instead of the gap to the roof."""

from __future__ import annotations

import json
import shutil
import subprocess
from types import SimpleNamespace

import pytest
import torch

from membound.analysis import analyze
from membound.device.ceilings import Ceilings
from membound.trace.capture_meta import timeline_in
from membound.trace.layout_probe import META_KEY, key_of, keys_of, main, measure, probe, ratios
from membound.trace.load import load_trace
from support.paths import FIXTURES, H200_CEILINGS

SEG = FIXTURES / "h200_real_segmentation_tv_oos1"
BWD = "aten::upsample_bilinear2d_backward"
FWD = "aten::upsample_bilinear2d"


def test_the_segmentation_scripts_interpolations_most_time_first():
    """DeepLabV3 (H200 ops pass, 3 steps): the pooled ASPP branch's backward (8 x 256 x 60 x
    60 -> 1 x 1, 13.2 ms a call) before the classifier's (8 x 21 x 480 x 480 -> 60 x 60),
    then the forwards; autocast runs them in fp32 (its outer fp16 calls, which hold the
    casts and the fp32 call, are not keys). The pooled branch's gradient is a slice of the
    concatenation's (batch stride 1280 x 60 x 60): NCHW rows and planes, taken."""
    keys = keys_of(load_trace(SEG / "trace.ops.json.xz"))
    got = [(k["name"], k["dims"], k.get("input_size"), k["output_size"], k["calls"]) for k in keys]
    assert got == [
        (BWD, [8, 256, 60, 60], [8, 256, 1, 1], [60, 60], 3),
        (BWD, [8, 21, 480, 480], [8, 21, 60, 60], [480, 480], 6),
        (FWD, [8, 21, 60, 60], None, [480, 480], 6),
        (FWD, [8, 256, 1, 1], None, [60, 60], 3),
    ]
    assert all(k["dtype"] == "float32" and k["align_corners"] is False for k in keys)
    assert keys[0]["device_ms"] == pytest.approx(39.6424, abs=1e-3)  # its copy of the slice too


@pytest.mark.parametrize(
    ("name", "dims", "types", "concrete", "strides"),
    [
        # channels_last already (channel stride 1)
        (FWD, [[2, 8, 4, 4]], ["float"], ["", "[8, 8]", "False"], [[128, 1, 32, 8]]),
        # the output given by scale factors: no size recorded
        (FWD, [[2, 8, 4, 4]], ["float"], ["", "", "False", "[2.0, 2.0]"], None),
        # not 4-D, a dtype the probe does not take, an op without an NHWC path
        (FWD, [[8, 4, 4]], ["float"], ["", "[8, 8]", "False"], None),
        (FWD, [[2, 8, 4, 4]], ["double"], ["", "[8, 8]", "False"], None),
        ("aten::upsample_linear1d", [[2, 8, 4]], ["float"], ["", "[8]", "False"], None),
        # a backward whose sizes disagree with its gradient
        (BWD, [[2, 8, 8, 8]], ["float"], ["", "[8, 8]", "[2, 4, 4, 4]", "False"], None),
        # align_corners not recorded
        (FWD, [[2, 8, 4, 4]], ["float"], ["", "[8, 8]"], None),
    ],
)
def test_calls_the_probe_cannot_time_in_both_layouts_are_left_out(
    name, dims, types, concrete, strides
):
    assert key_of(name, dims, types, concrete, strides) is None


def test_nearest_has_no_align_corners():
    key = key_of(
        "aten::upsample_nearest2d_backward", [[2, 3, 8, 8]], ["c10::Half"],
        ["", "[8, 8]", "[2, 3, 4, 4]", "", ""],
    )  # fmt: skip
    assert key == {
        "name": "aten::upsample_nearest2d_backward", "dims": [2, 3, 8, 8], "dtype": "float16",
        "output_size": [8, 8], "input_size": [2, 3, 4, 4],
    }  # fmt: skip


def _small(keys):
    """The fixture's keys at batch 1 and 8 channels: the same ops, CPU-sized."""
    out = []
    for k in keys:
        k = {a: b for a, b in k.items() if a not in ("device_ms", "calls")}
        k["dims"] = [1, 8, *k["dims"][2:]]
        if "input_size" in k:
            k["input_size"] = [1, 8, *k["input_size"][2:]]
        out.append(k)
    return out


def test_both_layouts_run_the_same_op():
    """Each key's op on an NCHW and a channels_last input gives the same result (the CPU
    has NHWC kernels for these too), and is timed in both."""
    keys = _small(keys_of(load_trace(SEG / "trace.ops.json.xz")))
    got = measure(keys, "cpu")
    assert got["device"] == "cpu" and len(got["ops"]) == len(keys)
    for row, key in zip(got["ops"], keys, strict=True):
        assert row["name"] == key["name"] and row["dims"] == key["dims"]
        assert row["nchw_ms"] > 0 and row["channels_last_ms"] > 0
        assert row["max_abs_diff"] < 1e-4


@pytest.mark.parametrize(
    ("mode", "name", "flag"),
    [
        ("bilinear", "upsample_bilinear2d", ["False"]),
        ("bicubic", "upsample_bicubic2d", ["True"]),
        ("nearest", "upsample_nearest2d", []),
        ("nearest-exact", "_upsample_nearest_exact2d", []),
    ],
)
def test_each_overload_is_the_interpolation_and_its_gradient(mode, name, flag):
    """The probe calls each forward overload with (input, output_size[, align_corners]) and
    each backward with (grad, output_size, input_size[, align_corners]): the forward gives
    F.interpolate's output, the backward autograd's gradient of it."""
    from membound.trace.layout_probe import _op

    x = torch.randn(1, 3, 5, 5, requires_grad=True)
    extra = {"align_corners": flag == ["True"]} if flag else {}
    y = torch.nn.functional.interpolate(x, size=(11, 11), mode=mode, **extra)
    g = torch.randn_like(y)
    y.backward(g)
    fwd = key_of(f"aten::{name}", [[1, 3, 5, 5]], ["float"], ["", "[11, 11]", *flag])
    bwd = key_of(
        f"aten::{name}_backward",
        [[1, 3, 11, 11]],
        ["float"],
        ["", "[11, 11]", "[1, 3, 5, 5]", *flag],
    )
    op, args = _op(fwd)
    assert torch.allclose(op(x.detach(), *args), y.detach(), atol=1e-5)
    op, args = _op(bwd)
    assert torch.allclose(op(g, *args), x.grad, atol=1e-5)


LINE = {
    "device": "NVIDIA H200",
    "ops": [
        {"name": BWD, "dims": [8, 256, 60, 60], "dtype": "float32", "output_size": [60, 60],
         "input_size": [8, 256, 1, 1], "align_corners": False, "nchw_ms": 12.0,
         "channels_last_ms": 1.2, "max_abs_diff": 0.0},
        {"name": BWD, "dims": [8, 21, 480, 480], "dtype": "float32", "output_size": [480, 480],
         "input_size": [8, 21, 60, 60], "align_corners": False, "nchw_ms": 1.6,
         "channels_last_ms": 0.8, "max_abs_diff": 0.0},
    ],
}  # fmt: skip


def _capture(tmp_path, extra=None):
    for name in (timeline_in(SEG).name, "trace.ops.json.xz", "capture.steps.jsonl"):
        shutil.copy(SEG / name, tmp_path / name)
    meta = json.loads((SEG / "capture.json").read_text())
    meta.pop(META_KEY, None)
    meta.update(extra or {})
    path = tmp_path / "capture.json"
    path.write_text(json.dumps(meta))
    return path


def test_keeps_the_measurement_in_the_meta(tmp_path):
    path = _capture(tmp_path)
    seen = []

    def run(cmd, **kw):
        seen.append(cmd)
        return SimpleNamespace(returncode=0, stdout="noise\n" + json.dumps(LINE), stderr="")

    said = probe(path, run=run)
    assert "upsample_bilinear2d_backward 8x256x60x60 12 -> 1.2 ms" in said
    keys = json.loads(seen[0][seen[0].index("--keys") + 1])
    assert len(keys) == 4 and "device_ms" not in keys[0]
    assert json.loads(path.read_text())[META_KEY] == LINE


def test_nothing_to_measure_runs_nothing(tmp_path):
    src = FIXTURES / "h200_real_lightning_fit_run6"
    for name in (timeline_in(src).name, "trace.ops.json.xz"):
        shutil.copy(src / name, tmp_path / name)
    path = tmp_path / "capture.json"
    path.write_text(json.dumps({"trace": timeline_in(src).name, "ops_trace": "trace.ops.json.xz"}))
    said = probe(path, run=lambda *a, **k: pytest.fail("ran"))
    assert said.startswith("no NCHW interpolation")


@pytest.mark.parametrize(
    ("outcome", "why"),
    [
        (subprocess.TimeoutExpired("x", 1), "took longer"),
        (
            SimpleNamespace(returncode=1, stdout="", stderr="RuntimeError: no CUDA device"),
            "no CUDA",
        ),
        (SimpleNamespace(returncode=0, stdout='{"ops": 3}', stderr=""), "no list of ops"),
    ],
)
def test_a_failed_probe_is_a_note_not_an_error(tmp_path, outcome, why):
    path = _capture(tmp_path)

    def run(cmd, **kw):
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    said = probe(path, run=run)
    meta = json.loads(path.read_text())
    assert why in said and why in meta[META_KEY]["error"]
    assert ratios(meta) == {}


def test_ratios_read_only_measurements():
    assert ratios({META_KEY: LINE}) == {
        (BWD, (8, 256, 60, 60), "float32"): pytest.approx(0.1),
        (BWD, (8, 21, 480, 480), "float32"): pytest.approx(0.5),
    }
    assert ratios({META_KEY: {"error": "x"}}) == {} and ratios(None) == {}
    assert ratios({META_KEY: {"ops": [{"name": BWD, "dims": "x"}]}}) == {}


def test_bad_keys_exit_2(capsys):
    for keys in ("not json", "[1]", '[{"name": "aten::mm", "dims": [1, 1, 1, 1]}]'):
        with pytest.raises(SystemExit) as e:
            main(["--keys", keys])
        assert e.value.code == 2


def test_channels_last_predicted_from_the_measurement(tmp_path):
    """With the layouts timed, the interpolation's finding (and channels_last's remedy) is
    each call's recorded time x (1 - its measured ratio), not the gap to the roof: here the
    pooled backward's 39.57 ms x 0.9 and the classifier's 9.51 ms x 0.5 over the ops pass's 3
    steps, 13.45 ms/step, against the 16.28 of the gap (ratios planted, not measured:
    the H200's are for a device session)."""
    ceilings = Ceilings.load(H200_CEILINGS)
    before = analyze([timeline_in(SEG)], ceilings)
    path = _capture(tmp_path, {META_KEY: LINE})
    a = analyze([timeline_in(path.parent)], ceilings)

    def upsample(x):
        (f,) = [f for f in x.findings if f.evidence.get("op") == BWD]
        return f

    assert upsample(before).time_lost_ms_per_step == pytest.approx(16.28, abs=0.01)
    f = upsample(a)
    want = (39.5707 * 0.9 + 9.5069 * 0.5) / 3
    assert f.time_lost_ms_per_step == pytest.approx(want, rel=1e-3)
    measured = f.evidence["channels_last_measured"]
    assert measured["share_of_calls_measured"] == pytest.approx(1.0)
    assert measured["ratios"] == {"8x256x60x60 float32": 0.1, "8x21x480x480 float32": 0.5}
    assert f.fix.endswith(
        "channels_last ran 8x256x60x60 float32 in 10% of its NCHW time, 8x21x480x480 float32 "
        "in 50% of its NCHW time."
    )
    (cl,) = [r for r in a.remedies if r.key == "channels_last"]
    assert cl.saving_ms_per_step == pytest.approx(want, rel=1e-3)


def test_measure_needs_cuda():
    if torch.cuda.is_available():
        pytest.skip("a CUDA machine measures for real (GPU test below)")
    with pytest.raises(RuntimeError, match="no CUDA"):
        measure(_small(keys_of(load_trace(SEG / "trace.ops.json.xz"))))


@pytest.mark.gpu
def test_measure_the_segmentation_keys_on_a_gpu():
    """The recorded keys at their own sizes: both layouts give one result, and the pooled
    branch's backward (every output element into one pixel per channel, NCHW's warps all on
    one address) is faster channels_last."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    keys = [
        {a: b for a, b in k.items() if a not in ("device_ms", "calls")}
        for k in keys_of(load_trace(SEG / "trace.ops.json.xz"))
    ]
    got = measure(keys)
    assert all(row["max_abs_diff"] < 1e-3 for row in got["ops"])
    pooled = got["ops"][0]
    assert pooled["dims"] == [8, 256, 60, 60]
    assert pooled["channels_last_ms"] < pooled["nchw_ms"]
