"""`trace.dtype_probe`: the trace's fp32 convolutions and matmuls timed again in bf16 after
diagnose's script, and `tf32-matmul` predicting bf16 on TF32 tensor-core calls from that
measurement (never from the ceilings' ratio)."""

from __future__ import annotations

import json
import shutil
import subprocess
from types import SimpleNamespace

import pytest
import torch

from membound.analysis import analyze
from membound.trace.capture_meta import timeline_in
from membound.trace.dtype_probe import (
    META_KEY,
    _run,
    key_of,
    keys_of,
    main,
    measure,
    of,
    probe,
    ratios_of,
    tag,
)
from membound.trace.load import load_trace
from support.paths import FIXTURES
from support.truth import truth_tally

DDPM = FIXTURES / "h100_real_ddpm_unet_truth1"
FWD, BWD = "aten::cudnn_convolution", "aten::convolution_backward"
CONV_TYPES = ["float", "float", "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar",
              "Scalar", "Scalar"]  # fmt: skip
BWD_TYPES = ["float", "float", "float", "ScalarList", "ScalarList", "ScalarList", "ScalarList",
             "Scalar", "ScalarList", "Scalar", "ScalarList"]  # fmt: skip


@pytest.fixture(scope="module")
def ddpm_keys():
    return keys_of(load_trace(DDPM / "trace.ops.json.xz"))


def test_the_unets_convolutions_most_kernel_time_first(ddpm_keys):
    """The DDPM U-Net (H100 ops pass, 3 steps, fp32, cuDNN's TF32 default): its 3x3
    convolutions' backward at 128 channels of 32 x 32 first (21 calls, 12.66 ms of kernels),
    the attention's fp32 bmm among them; the outer `aten::convolution` calls, which hold
    `cudnn_convolution`, are not keys. Its GroupNorms follow, in a quota of their own:
    the backward at 128 channels of 32 x 32 first (24 calls, 4.71 ms)."""
    assert len(ddpm_keys) == 16 + 12
    norms = ddpm_keys[16:]
    assert {k["op"] for k in norms} == {"gn", "gn_backward"}
    assert norms[0] == {
        "op": "gn_backward", "dtype": "float32", "input": [128, 128, 32, 32],
        "params": "float32", "groups": 32, "channels_last": False, "device_ms": 4.7098,
        "calls": 24,
    }  # fmt: skip
    assert [k["device_ms"] for k in norms] == sorted((k["device_ms"] for k in norms), reverse=True)
    ddpm_keys = ddpm_keys[:16]
    first = ddpm_keys[0]
    assert first["op"] == "conv_backward" and first["calls"] == 21
    assert first["input"] == [128, 128, 32, 32] and first["weight"] == [128, 128, 3, 3]
    assert first["stride"] == [1, 1] and first["padding"] == [1, 1] and first["groups"] == 1
    assert first["output_mask"] == [True, True, True] and first["bias_sizes"] == [128]
    assert first["channels_last"] is False and first["benchmark"] is False
    assert first["device_ms"] == pytest.approx(12.6645, abs=1e-3)
    ops = [k["op"] for k in ddpm_keys]
    assert ops.count("bmm") == 1 and "conv" in ops
    times = [k["device_ms"] for k in ddpm_keys]
    assert times == sorted(times, reverse=True)
    assert all(k["allow_tf32"] for k in ddpm_keys if k["op"] == "conv")


@pytest.mark.parametrize(
    ("name", "dims", "types", "concrete"),
    [
        # two dtypes: the probe times one
        (FWD, [[2, 8, 4, 4], [4, 8, 3, 3]], ["c10::BFloat16", "float", *CONV_TYPES[2:]],
         ["", "", "[1, 1]", "[1, 1]", "[1, 1]", "1", "False", "False", "True"]),
        # the arguments not recorded
        (FWD, [[2, 8, 4, 4], [4, 8, 3, 3]], CONV_TYPES, ["", ""]),
        # a 1-D convolution
        (FWD, [[2, 8, 4], [4, 8, 3]], CONV_TYPES,
         ["", "", "[1]", "[1]", "[1]", "1", "False", "False", "True"]),
        # a backward without its output mask
        (BWD, [[2, 4, 4, 4], [2, 8, 4, 4], [4, 8, 3, 3]], BWD_TYPES,
         ["", "", "", "[4]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]),
        # matmuls whose inner sizes disagree, an fp64 one
        ("aten::mm", [[4, 8], [7, 3]], ["float", "float"], ["", ""]),
        ("aten::mm", [[4, 8], [8, 3]], ["double", "double"], ["", ""]),
        ("aten::linear", [[4, 8], [3, 8]], ["float", "float"], ["", ""]),
    ],
)  # fmt: skip
def test_calls_the_probe_cannot_time_are_left_out(name, dims, types, concrete):
    assert key_of(name, dims, types, concrete) is None


def test_addmm_is_timed_as_its_product():
    key = key_of("aten::addmm", [[3], [4, 8], [8, 3], [], []],
                 ["float", "float", "float", "Scalar", "Scalar"], ["", "", "", "1", "1"])  # fmt: skip
    assert key == {"op": "mm", "dtype": "float32", "a": [4, 8], "b": [8, 3]}


@pytest.mark.parametrize(
    ("types", "strides", "want"),
    [
        # fp32 NCHW: as recorded, bf16, and both in channels_last
        (["float", "float"], None, ["ms", "bf16_ms", "channels_last_ms", "channels_last_bf16_ms"]),
        # fp16 autocast's: the same four (bf16 in its place: the depthwise question)
        (["c10::Half", "c10::Half"], None,
         ["ms", "bf16_ms", "channels_last_ms", "channels_last_bf16_ms"]),
        # bf16 already: channels_last alone
        (["c10::BFloat16", "c10::BFloat16"], None, ["ms", "channels_last_ms"]),
        # channels_last already: bf16 alone
        (["float", "float"], [[128, 1, 32, 8], [72, 1, 24, 8]], ["ms", "bf16_ms"]),
    ],
)  # fmt: skip
def test_each_key_is_timed_in_the_variants_its_fixes_would_run(types, strides, want):
    from membound.trace.dtype_probe import variants

    key = key_of(FWD, [[2, 8, 4, 4], [4, 8, 3, 3]], [*types, *CONV_TYPES[2:]],
                 ["", "", "[1, 1]", "[1, 1]", "[1, 1]", "1", "False", "False", "True"],
                 strides)  # fmt: skip
    assert [v[0] for v in variants(key)] == want
    assert key["dtype"] == {"float": "float32", "c10::Half": "float16"}.get(types[0], "bfloat16")


def _small(key):
    """A key at batch 2 and 8 channels: the same op, CPU-sized."""
    k = {a: b for a, b in key.items() if a not in ("device_ms", "calls")}
    if k["op"] == "conv":
        k["input"] = [2, 8, *k["input"][2:]]
        k["weight"] = [4, 8 // k["groups"], *k["weight"][2:]]
    return k


def test_the_probe_runs_the_ops_the_trace_recorded():
    """The forward key's op is F.conv2d; the backward key's (recorded as the trace writes it)
    gives autograd's gradients of the input, the weight and the bias."""
    x = torch.randn(2, 8, 6, 6, requires_grad=True)
    w = torch.randn(4, 8, 3, 3, requires_grad=True)
    b = torch.randn(4, requires_grad=True)
    y = torch.nn.functional.conv2d(x, w, b, stride=2, padding=1)
    g = torch.randn_like(y)
    y.backward(g)
    fwd = key_of(
        FWD, [[2, 8, 6, 6], [4, 8, 3, 3]], CONV_TYPES,
        ["", "", "[1, 1]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"],
        [[288, 36, 6, 1], [72, 9, 3, 1]],
    )  # fmt: skip
    bwd = key_of(
        BWD, [list(y.shape), [2, 8, 6, 6], [4, 8, 3, 3]], BWD_TYPES,
        ["", "", "", "[4]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1",
         "[True, True, True]"],
    )  # fmt: skip
    assert fwd["stride"] == [2, 2] and fwd["padding"] == [1, 1]
    torch.manual_seed(0)
    run = _run(fwd, torch.float32, "cpu")
    # the probe's tensors are its own: check the op on ours
    got = torch.ops.aten.convolution(
        x.detach(), w.detach(), None, fwd["stride"], fwd["padding"], fwd["dilation"], False,
        [0, 0], fwd["groups"],
    )  # fmt: skip
    assert torch.allclose(got + b.detach()[:, None, None], y.detach(), atol=1e-5)
    assert run().shape == y.shape
    gi, gw, gb = torch.ops.aten.convolution_backward(
        g, x.detach(), w.detach(), bwd["bias_sizes"], bwd["stride"], bwd["padding"],
        bwd["dilation"], bwd["transposed"], bwd["output_padding"], bwd["groups"],
        bwd["output_mask"],
    )  # fmt: skip
    assert torch.allclose(gi, x.grad, atol=1e-4) and torch.allclose(gw, w.grad, atol=1e-4)
    assert torch.allclose(gb, b.grad, atol=1e-4)
    out = _run(bwd, torch.float32, "cpu")()
    assert [t.shape for t in out] == [x.shape, w.shape, b.shape]


def test_every_key_of_the_trace_is_timed_in_both_dtypes(ddpm_keys):
    keys = [_small(k) for k in ddpm_keys if k["op"] == "conv"][:2]
    keys.append({"op": "bmm", "dtype": "float32", "a": [2, 4, 8], "b": [2, 8, 3]})
    got = measure(keys, "cpu")
    assert got["device"] == "cpu" and len(got["ops"]) == 3
    for row, key in zip(got["ops"], keys, strict=True):
        assert {k: row[k] for k in key} == key
        assert row["ms"] > 0 and row["bf16_ms"] > 0
    assert all(r["channels_last_ms"] > 0 and r["channels_last_bf16_ms"] > 0 for r in got["ops"][:2])
    assert "channels_last_ms" not in got["ops"][2]


def _line(keys, ratio):
    ops = [{**{k: v for k, v in key.items() if k not in ("device_ms", "calls")},
            "ms": 2.0, "bf16_ms": 2.0 * ratio} for key in keys]  # fmt: skip
    return {"device": "NVIDIA H100 80GB HBM3", "ops": ops}


def _ratios(meta, **kw):
    """The ratios a capture meta's measurement gives (`ratios_of(of(meta))`)."""
    return ratios_of(of(meta), **kw)


def test_ratios_are_keyed_as_the_trace_keys_them(ddpm_keys):
    got = _ratios({META_KEY: _line(ddpm_keys, 0.6)})
    assert set(got) == {tag(k) for k in ddpm_keys}
    assert _ratios({META_KEY: _line(ddpm_keys, 0.6)}, dtype="float16") == {}
    assert all(v == pytest.approx(0.6) for v in got.values())
    assert _ratios({META_KEY: {"error": "no CUDA"}}) == {}
    assert _ratios({}) == {} and _ratios(None) == {}


def _capture(tmp_path, extra=None):
    for name in (timeline_in(DDPM).name, "trace.ops.json.xz", "capture.steps.jsonl"):
        shutil.copy(DDPM / name, tmp_path / name)
    shutil.copy(DDPM / "ceilings.json", tmp_path / "ceilings.json")
    meta = json.loads((DDPM / "capture.json").read_text())
    meta.pop(META_KEY, None)
    meta.update(extra or {})
    path = tmp_path / "capture.json"
    path.write_text(json.dumps(meta))
    return path


def test_keeps_the_measurement_in_the_meta(tmp_path, ddpm_keys):
    path = _capture(tmp_path)
    seen = []
    line = _line(ddpm_keys, 0.5)

    def run(cmd, **kw):
        seen.append(cmd)
        return SimpleNamespace(returncode=0, stdout="noise\n" + json.dumps(line), stderr="")

    said = probe(path, run=run)
    assert "28 convolution/matmul/norm shapes" in said
    assert "took 56 ms in all as recorded, 28 in bf16" in said
    keys = json.loads(seen[0][seen[0].index("--keys") + 1])
    assert len(keys) == 28 and "device_ms" not in keys[0]
    kept = json.loads(path.read_text())[META_KEY]
    assert kept["ops"] == line["ops"]
    assert kept["trace_device_ms"] == pytest.approx(sum(k["device_ms"] for k in ddpm_keys))


@pytest.mark.parametrize(
    ("outcome", "why"),
    [
        (subprocess.TimeoutExpired("x", 1), "took longer"),
        (SimpleNamespace(returncode=1, stdout="", stderr="RuntimeError: no CUDA device"),
         "no CUDA"),
        (SimpleNamespace(returncode=0, stdout='{"ops": 3}', stderr=""), "no list of ops"),
    ],
)  # fmt: skip
def test_a_failed_probe_is_a_note_not_an_error(tmp_path, outcome, why):
    path = _capture(tmp_path)

    def run(cmd, **kw):
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    said = probe(path, run=run)
    assert said.startswith("convolutions in bf16 not measured") and why in said
    meta = json.loads(path.read_text())
    assert why in meta[META_KEY]["error"] and said in meta["notes"]


def test_the_command_line_refuses_what_it_cannot_time(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--keys", json.dumps([{"op": "conv", "input": [1, 2, 3, 3]}])])
    assert e.value.code == 2
    assert main(["--device", "cpu", "--keys", json.dumps([{"op": "mm", "a": [2, 3],
                 "b": [3, 4]}])]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["ops"][0]["ms"] > 0


# [the rule] ----------------------------------------------------------------------------
def _report(tmp_path, ddpm_keys, ratio):
    from membound.report.json_report import to_dict

    extra = {} if ratio is None else {META_KEY: _line(ddpm_keys, ratio)}
    _capture(tmp_path, extra)
    c = truth_tally.ceilings_of(DDPM, None)
    return to_dict(analyze([timeline_in(tmp_path)], c))


def _finding(rep, code):
    return next((f for f in rep["findings"] if f["code"] == code), None)


def test_no_measurement_no_finding(tmp_path, ddpm_keys):
    """The U-Net as recorded (no probe then): no `tf32-matmul`, the bf16 remedy as before
    (6.22 ms/step from `fp32-storage` and `fp32-matmul`; measured 11.38)."""
    rep = _report(tmp_path, ddpm_keys, None)
    assert _finding(rep, "tf32-matmul") is None
    bf16 = next(r for r in rep["remedies"] if r["remedy"] == "bf16")
    assert bf16["saving_ms_per_step"] == pytest.approx(6.22, abs=0.01)


def test_the_measured_ratio_prices_the_tf32_convolutions(tmp_path, ddpm_keys):
    """With the probe's ratio, `tf32-matmul` removes (1 - ratio) of the TF32 calls' kernel
    time: the cuDNN convolution calls of 3 steps (30.90 ms/step: those on TF32 tensor cores,
    30.82, and 0.08 that cuDNN ran on CUDA cores with TF32 allowed), the probed keys' share
    of them measured and the rest at the same ratio. The attention's bmm ran on CUDA cores
    (`fp32-matmul`'s), so it is not counted twice. bf16's remedy takes it in, read through the
    GPU what-if and capped by autocast's host work (8.45 ms/step; measured 11.38)."""
    rep = _report(tmp_path, ddpm_keys, 0.6)
    f = _finding(rep, "tf32-matmul")
    ev = f["evidence"]
    assert set(ev["ops"]) == {FWD, BWD}
    assert ev["device_ms_per_step"] == pytest.approx(30.90, abs=0.01)
    assert ev["kernel_ms_per_step"] == pytest.approx(0.4 * 30.90, abs=0.01)
    assert ev["bf16_time_ratio_measured"] == pytest.approx(0.6)
    assert 0.7 < ev["measured_share_of_time"] < 0.8
    assert "1.67x as fast in bf16" in f["fix"] and "torch.autocast" in f["fix"]
    bf16 = next(r for r in rep["remedies"] if r["remedy"] == "bf16")
    assert "tf32-matmul" in bf16["codes"] and bf16["saving_ms_per_step"] > 6.22
    assert "tf32-matmul" not in next(r for r in rep["remedies"] if r["remedy"] == "tf32")["codes"]


def test_bf16_no_faster_here_is_no_finding(tmp_path, ddpm_keys):
    rep = _report(tmp_path, ddpm_keys, 1.05)
    assert _finding(rep, "tf32-matmul") is None


def test_pytorchs_own_depthwise_kernel_is_keyed_as_a_convolution():
    """`aten::_conv_depthwise2d` (input, weight, kernel_size, bias, stride, padding,
    dilation), where cuDNN does not take the depthwise shape: keyed like cuDNN's forward, one
    group a channel, its search flag the cuDNN forwards' (EfficientNet-B0's 96-channel 3 x 3
    at 112 x 112 runs there under fp16 autocast on an H100)."""
    key = key_of(
        "aten::_conv_depthwise2d", [[2, 8, 6, 6], [8, 1, 3, 3], [], [], [], [], []],
        ["c10::Half", "c10::Half", "ScalarList", "", "ScalarList", "ScalarList", "ScalarList"],
        ["", "", "[3, 3]", "", "[2, 2]", "[1, 1]", "[1, 1]"],
    )  # fmt: skip
    assert key["op"] == "conv" and key["groups"] == 8 and key["dtype"] == "float16"
    assert key["stride"] == [2, 2] and key["benchmark"] is None
    x, w = torch.randn(2, 8, 6, 6), torch.randn(8, 1, 3, 3)
    want = torch.nn.functional.conv2d(x, w, stride=2, padding=1, groups=8)
    got = torch.ops.aten.convolution(x, w, None, key["stride"], key["padding"], key["dilation"],
                                     False, [0, 0], key["groups"])  # fmt: skip
    assert torch.allclose(got, want, atol=1e-5)
    keys = keys_of(load_trace(FIXTURES / "h100_real_efficientnet_amp_truth1" / "trace.ops.json.xz"))
    mine = [k for k in keys if k["op"] == "conv" and k["input"] == [256, 96, 112, 112]]
    assert len(mine) == 1 and mine[0]["groups"] == 96 and mine[0]["benchmark"] is False


def test_a_variant_the_device_refuses_is_an_error_of_its_own():
    """A key whose op cannot run (here: a weight whose channels do not match the input's)
    keeps why, variant by variant; the other keys are still timed."""
    bad = {"op": "conv", "dtype": "float32", "input": [1, 8, 4, 4], "weight": [4, 3, 3, 3],
           "stride": [1, 1], "padding": [1, 1], "dilation": [1, 1], "groups": 1,
           "channels_last": False, "benchmark": False, "allow_tf32": True}  # fmt: skip
    good = {"op": "mm", "dtype": "float32", "a": [2, 3], "b": [3, 4]}
    got = measure([bad, good], "cpu")["ops"]
    assert "ms" not in got[0] and set(got[0]["errors"]) == {
        "ms",
        "bf16_ms",
        "channels_last_ms",
        "channels_last_bf16_ms",
    }
    assert got[1]["ms"] > 0 and "errors" not in got[1]
    assert _ratios({META_KEY: {"ops": got}}) == {
        tag(good): pytest.approx(got[1]["bf16_ms"] / got[1]["ms"])
    }


# the norms' recorded calls, as an H100 trace wrote them (2026-12-07: classification_tv's
# cuDNN BatchNorm in fp32, the DDPM U-Net's GroupNorm, EfficientNet-B0's BatchNorm in bf16)
BN_FWD = ("aten::cudnn_batch_norm", [[128, 64, 88, 88], [64], [64], [64], [64], [], [], []],
          ["float", "float", "float", "float", "float", "Scalar", "Scalar", "Scalar"],
          ["", "", "", "", "", "True", "0.10000000000000001", "1.0000000000000001e-05"],
          [[495616, 7744, 88, 1], [1], [1], [1], [1], [], [], []])  # fmt: skip
BN_BWD = ("aten::cudnn_batch_norm_backward",
          [[128, 2048, 6, 6], [128, 2048, 6, 6], [2048], [2048], [2048], [2048], [2048], [], [0]],
          ["float"] * 7 + ["Scalar", "unsigned char"], [""] * 7 + ["1e-05", ""],
          [[73728, 36, 6, 1], [73728, 36, 6, 1], [1], [1], [1], [1], [1], [], [1]])  # fmt: skip
NATIVE_BN_BWD = ("aten::native_batch_norm_backward",
                 [[256, 1280, 7, 7], [256, 1280, 7, 7], [1280], [1280], [1280], [1280], [1280],
                  [], [], []],
                 ["c10::BFloat16", "c10::BFloat16", "float", "float", "float", "float", "float",
                  "Scalar", "Scalar", "ScalarList"],
                 [""] * 7 + ["True", "1e-05", "[True, True, True]"],
                 [[62720, 49, 7, 1], [62720, 49, 7, 1], [1], [1], [1], [1], [1], [], [], []])  # fmt: skip
GN_FWD = ("aten::native_group_norm", [[128, 128, 32, 32], [128], [128], [], [], [], [], []],
          ["float", "float", "float", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar"],
          ["", "", "", "128", "128", "1024", "32", "1e-05"],
          [[131072, 1024, 32, 1], [1], [1], [], [], [], [], []])  # fmt: skip
GN_BWD = ("aten::native_group_norm_backward",
          [[128, 128, 32, 32], [128, 128, 32, 32], [128, 32], [128, 32], [128], [], [], [], [], []],
          ["float"] * 5 + ["Scalar"] * 4 + ["ScalarList"],
          [""] * 5 + ["128", "128", "1024", "32", "[True, True, True]"],
          [[131072, 1024, 32, 1], [131072, 1024, 32, 1], [32, 1], [32, 1], [1], [], [], [], [], []])  # fmt: skip


@pytest.mark.parametrize(
    ("call", "want"),
    [
        (BN_FWD, {"op": "bn", "dtype": "float32", "input": [128, 64, 88, 88],
                  "params": "float32", "training": True, "channels_last": False}),
        (BN_BWD, {"op": "bn_backward", "dtype": "float32", "input": [128, 2048, 6, 6],
                  "params": "float32", "training": True, "channels_last": False}),
        # autocast's: a bf16 input, fp32 parameters
        (NATIVE_BN_BWD, {"op": "bn_backward", "dtype": "bfloat16", "input": [256, 1280, 7, 7],
                         "params": "float32", "training": True, "channels_last": False}),
        (GN_FWD, {"op": "gn", "dtype": "float32", "input": [128, 128, 32, 32],
                  "params": "float32", "groups": 32, "channels_last": False}),
        (GN_BWD, {"op": "gn_backward", "dtype": "float32", "input": [128, 128, 32, 32],
                  "params": "float32", "groups": 32, "channels_last": False}),
    ],
)  # fmt: skip
def test_the_norms_between_the_convolutions_are_keys(call, want):
    from membound.trace.dtype_probe import variants

    key = key_of(*call)
    assert key == want
    fields = [v[0] for v in variants(key)]
    if want["dtype"] == "bfloat16":
        assert fields == ["ms", "channels_last_ms"]
    else:
        assert fields == ["ms", "bf16_ms", "channels_last_ms", "channels_last_bf16_ms"]


@pytest.mark.parametrize(
    "call",
    [
        # eval-mode flag not recorded
        (BN_FWD[0], BN_FWD[1], BN_FWD[2], ["", "", "", "", ""], BN_FWD[4]),
        # fp16 parameters with a bf16 input: no dtype autocast gives
        (NATIVE_BN_BWD[0], NATIVE_BN_BWD[1], ["c10::BFloat16", "c10::BFloat16", "c10::Half",
         *NATIVE_BN_BWD[2][3:]], NATIVE_BN_BWD[3], NATIVE_BN_BWD[4]),
        # groups that do not divide the channels
        (GN_FWD[0], GN_FWD[1], GN_FWD[2], ["", "", "", "128", "128", "1024", "3", "1e-05"], GN_FWD[4]),
        # a 2-D input (BatchNorm1d's): no channel plane
        (BN_FWD[0], [[128, 64], [64], [64], [64], [64], [], [], []], *BN_FWD[2:]),
    ],
)  # fmt: skip
def test_norm_calls_the_probe_cannot_time_are_left_out(call):
    assert key_of(*call) is None


def test_a_norm_key_runs_its_forward_and_backward():
    """The forward is PyTorch's own (F.batch_norm / F.group_norm, which choose the kernels as
    the model's call did); the backward is autograd's of one forward: it returns the input's
    gradient. In channels_last a GroupNorm's output and input gradient come back in
    channels_last (the copies the next convolution makes)."""
    small = {"input": [2, 8, 5, 5], "params": "float32", "channels_last": False}
    bn = {"op": "bn", "dtype": "float32", "training": True, **small}
    torch.manual_seed(2)
    y = _run({**bn, "dtype": "float64", "params": "float64"}, torch.float64, "cpu")()
    torch.manual_seed(2)  # the probe's draws, in its order: input, weight, bias
    x = torch.randn(2, 8, 5, 5, dtype=torch.float64)
    w = torch.rand(8, dtype=torch.float64).add_(0.5)
    b = torch.randn(8, dtype=torch.float64)
    mean, var = x.mean((0, 2, 3), keepdim=True), x.var((0, 2, 3), unbiased=False, keepdim=True)
    ref = (x - mean) / (var + 1e-5).sqrt() * w[:, None, None] + b[:, None, None]
    assert torch.allclose(y, ref, atol=1e-10)  # normalised by the batch's statistics
    gn = {"op": "gn", "dtype": "float32", "groups": 4, **small}
    assert _run(gn, torch.float32, "cpu")().is_contiguous()
    out = _run(gn, torch.float32, "cpu", channels_last=True)()
    assert out.is_contiguous(memory_format=torch.channels_last) and not out.is_contiguous()
    back = {**gn, "op": "gn_backward"}
    dx = _run(back, torch.float32, "cpu", channels_last=True)()
    assert dx.shape == (2, 8, 5, 5) and dx.is_contiguous(memory_format=torch.channels_last)
    assert _run({**bn, "op": "bn_backward"}, torch.bfloat16, "cpu")().dtype == torch.bfloat16
    # bf16 under autocast, the fix it stands for: a BatchNorm takes the bf16 input as it is,
    # a GroupNorm runs in fp32 (the H100 refused GroupNorm with a bf16 input and fp32
    # parameters outside autocast: "expected scalar type BFloat16 but found Float")
    assert _run(bn, torch.bfloat16, "cpu")().dtype == torch.bfloat16
    seen = []
    real = torch.nn.functional.group_norm

    def spy(*args, **kw):
        seen.append((args[0].dtype, torch.is_autocast_enabled("cpu")))
        return real(*args, **kw)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(torch.nn.functional, "group_norm", spy)
        _run(gn, torch.bfloat16, "cpu")()
        _run(gn, torch.float32, "cpu")()
        _run({**gn, "params": "bfloat16"}, torch.bfloat16, "cpu")()  # a bf16 model: no autocast
    assert seen == [(torch.bfloat16, True), (torch.float32, False), (torch.bfloat16, False)]
    assert _run(back, torch.bfloat16, "cpu")().dtype == torch.bfloat16  # the input's gradient


def test_the_group_norm_run_matches_the_module():
    """The probe's GroupNorm forward and backward compute nn.GroupNorm's output and input
    gradient (checked against float64), in both layouts."""
    torch.manual_seed(3)
    from membound.trace import dtype_probe

    key = {"op": "gn_backward", "dtype": "float64", "input": [3, 6, 4, 5], "params": "float64",
           "groups": 3, "channels_last": False}  # fmt: skip
    f64 = {"dtype": torch.float64}
    for cl in (None, torch.channels_last):
        torch.manual_seed(5)
        fn = dtype_probe._norm_run(key, torch.float64, "cpu", cl)
        torch.manual_seed(5)  # the probe's draws, in its order
        x = torch.randn(3, 6, 4, 5, **f64).requires_grad_()
        w = torch.rand(6, **f64).add_(0.5).requires_grad_()
        b = torch.randn(6, **f64).requires_grad_()
        like = torch.empty(3, 6, 4, 5, **f64)
        g = torch.randn_like(like if cl is None else like.contiguous(memory_format=cl))
        mean = x.reshape(3, 3, -1).mean(-1, keepdim=True)
        var = x.reshape(3, 3, -1).var(-1, unbiased=False, keepdim=True)
        y = ((x.reshape(3, 3, -1) - mean) / (var + 1e-5).sqrt()).reshape(3, 6, 4, 5)
        ref = y * w[:, None, None] + b[:, None, None]  # GroupNorm written out
        (dx_ref,) = torch.autograd.grad(ref, (x,), g)
        dx = fn()
        assert torch.allclose(dx, dx_ref, atol=1e-10)
        assert cl is None or dx.is_contiguous(memory_format=cl)


def test_norm_keys_are_timed_in_every_variant_here():
    keys = [
        {"op": "bn", "dtype": "float16", "input": [2, 8, 5, 5], "params": "float32",
         "training": True, "channels_last": False},
        {"op": "gn_backward", "dtype": "float32", "input": [2, 8, 5, 5], "params": "float32",
         "groups": 4, "channels_last": False},
    ]  # fmt: skip
    got = measure(keys, "cpu")
    for row in got["ops"]:
        assert "errors" not in row, row.get("errors")
        assert all(
            row[f] > 0 for f in ("ms", "bf16_ms", "channels_last_ms", "channels_last_bf16_ms")
        )
