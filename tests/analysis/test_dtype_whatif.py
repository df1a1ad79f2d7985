"""`analysis.dtype_whatif`: fp16 autocast's convolutions and matmuls at the speed
`trace.dtype_probe` measured for them in bf16, replayed, in the bf16 remedy's figure. The
recorded H100 runs had no probe: the measurement is written into copies of their metas, at
ratios chosen for the test, so what is checked is the arithmetic, not bf16's speed."""

from __future__ import annotations

import json
import shutil

import pytest

from membound.analysis import analyze
from membound.analysis.dtype_whatif import kind_of
from membound.report.json_report import to_dict
from membound.trace.capture_meta import timeline_in
from membound.trace.dtype_probe import META_KEY, keys_of
from membound.trace.load import load_trace
from support.paths import FIXTURES
from support.truth import truth_tally

EFFNET = FIXTURES / "h100_real_efficientnet_amp_truth1"
CONVNEXT = FIXTURES / "h100_real_convnext_amp_truth1"


DDPM = FIXTURES / "h100_real_ddpm_unet_truth1"


def _probed(src, tmp_path, times_of=None):
    """A copy of fixture `src` in `tmp_path` whose meta holds the probe's measurement of its
    keys, each timed at 1.0 ms as recorded and `times_of(key)` (a dict of variant -> ms) in
    the others (None: no measurement); returns the folder."""
    for f in src.iterdir():
        shutil.copy(f, tmp_path / f.name)
    meta = json.loads((src / "capture.json").read_text())
    if times_of is not None:
        rows = []
        for key in keys_of(load_trace(src / "trace.ops.json.xz")):
            row = {k: v for k, v in key.items() if k not in ("device_ms", "calls")}
            rows.append({**row, "ms": 1.0, **times_of(key)})
        meta[META_KEY] = {"ops": rows}
    (tmp_path / "capture.json").write_text(json.dumps(meta))
    return tmp_path


def _analysis(src, tmp_path, times_of=None):
    folder = _probed(src, tmp_path, times_of)
    return analyze([timeline_in(folder)], truth_tally.ceilings_of(src, None))


def _report(src, tmp_path, ratio_of=None):
    """Today's report of a copy of fixture `src` whose keys were timed `ratio_of(key)` x in
    bf16 (None: no measurement)."""
    times = None if ratio_of is None else (lambda k: {"bf16_ms": ratio_of(k)})
    return to_dict(_analysis(src, tmp_path, times))


def _bf16(rep):
    return next((r for r in rep["remedies"] if r["remedy"] == "bf16"), None)


@pytest.mark.parametrize(
    ("key", "kind"),
    [
        ({"op": "conv", "weight": [96, 1, 3, 3], "groups": 96}, "conv:depthwise"),
        ({"op": "conv_backward", "weight": [96, 16, 1, 1], "groups": 1}, "conv_backward:dense"),
        # one input channel a group but one group: a 1-channel input, not depthwise
        ({"op": "conv", "weight": [32, 1, 3, 3], "groups": 1}, "conv:dense"),
        ({"op": "bmm"}, "bmm"),
    ],
)
def test_untimed_calls_borrow_from_their_kind(key, kind):
    assert kind_of(key) == kind


def test_without_a_measurement_bf16_stays_as_it_was(tmp_path):
    """EfficientNet-B0 under fp16 autocast (H100): bf16 predicted 3.88 ms/step from the
    GradScaler's sync, measured -33.06; the depthwise note says the change is not known."""
    rep = _report(EFFNET, tmp_path)
    assert _bf16(rep)["saving_ms_per_step"] == pytest.approx(3.88, abs=0.01)
    assert any("depthwise convolutions' change" in n for n in rep["notes"])
    assert not any(n.startswith("bf16 in place of fp16, timed here") for n in rep["notes"])


def test_depthwise_convolutions_slower_in_bf16_make_bf16_a_loss(tmp_path):
    """The depthwise keys at 2.5x their fp16 time, the dense ones unchanged: the fp16 calls'
    kernel time grows by 1.5x the depthwise calls' (the untimed depthwise calls at their
    kind's ratio), and with no trusted replay of this loop (its steps launch different
    kernels: timm's random erasing) the step grows by that much. bf16's figure is the
    scaler's sync less it, a loss; the what-if's note replaces the depthwise caveat."""
    rep = _report(EFFNET, tmp_path, lambda k: 2.5 if "depthwise" in kind_of(k) else 1.0)
    note = next(n for n in rep["notes"] if n.startswith("bf16 in place of fp16, timed here"))
    assert "no trusted replay" in note and "costs" in note
    assert not any("depthwise convolutions' change" in n for n in rep["notes"])
    w = rep["gpu_whatif"]["bf16_kernels"]
    assert w["replayed"] is False and 0.5 < w["timed_share"] < 1.0
    assert w["kernel_ms_after"] > w["kernel_ms_before"]
    assert w["saving_ms"] == pytest.approx(w["kernel_ms_before"] - w["kernel_ms_after"], abs=1e-3)
    bf16 = _bf16(rep)
    assert bf16["saving_ms_per_step"] < 0
    # the sync's 3.88 and the kernels' change
    assert bf16["saving_ms_per_step"] == pytest.approx(3.8754 + w["saving_ms"], abs=0.01)
    assert "channels_last_kernels" not in rep["gpu_whatif"]  # not measured


def test_faster_kernels_are_read_through_the_replay(tmp_path):
    """ConvNeXt-T under fp16 autocast (H100), every timed key at 0.8 of its fp16 time: the
    replay (trusted here: every step launches the same kernels) gives the step's saving,
    at most the kernel time removed; bf16's figure adds it to the sync's."""
    (tmp_path / "plain").mkdir()
    (tmp_path / "probed").mkdir()
    plain = _bf16(_report(CONVNEXT, tmp_path / "plain"))
    rep = _report(CONVNEXT, tmp_path / "probed", lambda k: 0.8)
    note = next(n for n in rep["notes"] if n.startswith("bf16 in place of fp16, timed here"))
    assert "the step replayed" in note and "saves" in note
    w = rep["gpu_whatif"]["bf16_kernels"]
    assert w["replayed"] is True
    assert w["kernel_ms_after"] == pytest.approx(0.8 * w["kernel_ms_before"], abs=1e-3)
    saved = _bf16(rep)["saving_ms_per_step"] - plain["saving_ms_per_step"]
    assert saved == pytest.approx(w["saving_ms"], abs=1e-3)
    assert 0 < saved <= w["kernel_ms_before"] - w["kernel_ms_after"] + 1e-3


def test_nchw_convolutions_in_channels_last_price_that_remedy(tmp_path):
    """The DDPM U-Net (fp32, NCHW), its NCHW convolution keys timed 1.3x slower in
    channels_last (the eager fix measured -12.93 ms/step there, with no prediction): the
    channels_last remedy now predicts a loss of the replayed step; bf16 of fp32 calls is
    `tf32-matmul`'s, not this what-if's."""
    rep = to_dict(_analysis(DDPM, tmp_path, lambda k: _conv(k, bf16_ms=1.0, channels_last_ms=1.3)))
    w = rep["gpu_whatif"]["channels_last_kernels"]
    assert w["kernel_ms_after"] == pytest.approx(1.3 * w["kernel_ms_before"], abs=1e-3)
    assert w["saving_ms"] < 0 and "bf16_kernels" not in rep["gpu_whatif"]
    # no finding names channels_last here: the measured loss is a remedy of its own, last
    cl = rep["remedies"][-1]
    assert cl["remedy"] == "channels_last" and cl["codes"] == []
    assert cl["saving_ms_per_step"] == pytest.approx(w["saving_ms"], abs=1e-3)


def test_bf16_with_channels_last_reads_the_two_timed_together(tmp_path):
    """AMP with channels_last on the fp32 U-Net: the keys timed in bf16 and channels_last
    together (0.5 of fp32 NCHW) replace `tf32-matmul` (bf16 alone, 0.7) and the channels_last
    what-if (1.3); the other findings bf16 recovers (fp32 storage, the CUDA-core matmuls)
    are counted as before."""
    from membound.analysis.remedies import combined

    a = _analysis(
        DDPM, tmp_path,
        lambda k: _conv(k, bf16_ms=0.7, channels_last_ms=1.3, channels_last_bf16_ms=0.5),
    )  # fmt: skip
    curve = a.gpu_whatif
    step = a.timing.unprofiled_median_ms
    both = curve["bf16_channels_last_kernels"]
    assert both["kernel_ms_after"] == pytest.approx(0.5 * both["kernel_ms_before"], abs=1e-3)
    assert both["saving_ms"] > 0
    rest = [f for f in a.findings if f.code != "tf32-matmul"]
    got = combined(a.findings, {"bf16", "channels_last"}, step, curve)
    assert got == pytest.approx(combined(rest, {"bf16"}, step, curve) + both["saving_ms"], abs=1e-3)
    # bf16 alone keeps tf32-matmul and adds no channels_last
    alone = combined(a.findings, {"bf16"}, step, curve)
    assert alone > combined(rest, {"bf16"}, step, curve)


def _conv(key, bf16_ms, **conv_times):
    """A key's times: `bf16_ms`, and `conv_times` where it is an NCHW convolution."""
    nchw = key["op"].startswith("conv") and not key.get("channels_last")
    return {"bf16_ms": bf16_ms, **(conv_times if nchw else {})}


def _with_layout(src, tmp_path, cl_ratio):
    """A copy of fixture `src` whose NCHW convolution keys were timed `cl_ratio` x slower in
    channels_last (and unchanged in bf16)."""
    return to_dict(_analysis(src, tmp_path, lambda k: _conv(k, 1.0, channels_last_ms=cl_ratio)))


def _remedy(rep, key):
    return next(r for r in rep["remedies"] if r["remedy"] == key)


@pytest.mark.parametrize(
    ("src", "picks"),
    [
        # 7 x 7 depthwise (one input channel a group) and widening convolutions: inductor
        # lays them out channels_last when compiling the training graph
        (CONVNEXT, True),
        # a U-Net's decoder narrows 384 -> 128 channels with 3 x 3 kernels: it does not
        (DDPM, False),
    ],
)
def test_compile_takes_the_channels_last_convolutions_where_inductor_picks_them(
    src, picks, tmp_path
):
    (tmp_path / "probed").mkdir()
    plain = to_dict(analyze([timeline_in(src)], truth_tally.ceilings_of(src, None)))
    rep = _with_layout(src, tmp_path / "probed", 1.25)
    w = rep["gpu_whatif"]["channels_last_kernels"]
    assert w["inductor_picks_it"] is picks and w["saving_ms"] < 0
    change = (
        _remedy(rep, "compile")["saving_ms_per_step"]
        - _remedy(plain, "compile")["saving_ms_per_step"]
    )
    assert change == pytest.approx(w["saving_ms"] if picks else 0.0, abs=1e-3)
