"""The twenty-second session's four H100 calls (2026-12-07; the datasheet ceilings), which
put the convolutions timed after the script (`trace.dtype_probe`, new the session before) to
the test, and then the norms timed beside them:

1. `bash benchmarks/gpu/session_dec14a.sh` (`h100_real_classification_tv_oos1`,
   `h100_real_ddpm_unet_truth3`, `h100_real_efficientnet_amp_truth2`): torchvision's
   classification recipe out of sample (GPU 97% busy, 49.27 ms a step), and the DDPM U-Net
   and EfficientNet-B0 with bf16 and channels-last. In the call: the recipe's AMP saved 14.30
   where bf16 was predicted 6.44 (its convolution backward sat below the TF32 ridge, so
   `tf32-matmul` left it out), channels_last 13.92 against 33.25 (the findings on its
   convolutions added to the same convolutions timed in channels_last, 6.83: counted twice);
   the DDPM's bf16 12.52 (9.16), its channels_last -13.07 (+4.52: its convolutions got
   faster in the probe, everything else was not timed); EfficientNet's channels_last 54.05
   (58.82, within), its bf16 -29.37 (-13.51: the depthwise convolutions' loss, measured, but
   not its BatchNorms').
2. `bash benchmarks/gpu/session_dec15a.sh` (no fixture: the variants' traces, compared op by
   op with call 1's): the DDPM in channels_last ran 248 more copies a step (16.4 ms; its
   GroupNorms have no channels_last kernel: the input is copied to NCHW, the next
   convolution copies it back, forward and backward) and its elementwise backward ops 4.6 ms
   slower in mixed layouts, against 8.1 ms its convolutions gained; EfficientNet's BatchNorms
   in bf16 left cuDNN for PyTorch's kernels (45.7 -> 64.4 ms a step), beside the depthwise
   convolutions' 20.5 ms more; classification_tv's BatchNorms gained 6.3 ms in
   channels_last, its convolutions 6.9.
3. `bash benchmarks/gpu/session_dec15b.sh` (`h100_real_classification_tv_oos2`,
   `h100_real_ddpm_unet_truth4`, `h100_real_efficientnet_amp_truth3`), the norms now timed
   too: classification_tv's compile (its top remedy) saved 18.39 (20.11: the best fix, on
   top), channels_last 13.83 (10.89), AMP 13.68 (9.07); EfficientNet's bf16 -29.56 (-26.63)
   and channels_last 47.16 (51.97): within. The DDPM's channels_last -11.90 (-4.79) and bf16
   8.82 (0.00: on this host the unprofiled CPU time, spinning included, put the host's floor
   at the step); its GroupNorms' bf16 variant failed (a bf16 input with fp32 parameters,
   which autocast never gives GroupNorm: it runs it in fp32).
4. `bash benchmarks/gpu/session_dec15c.sh` (`h100_real_ddpm_unet_truth5`): the DDPM again,
   GroupNorm timed under autocast and in channels_last with the copy of the saved input its
   convolution's backward also makes: channels_last -10.22 (-8.12, within); bf16 saved 2.23
   on this host (5.37).

bf16 on the DDPM saved 11.38, 12.52, 8.82 and 2.23 ms/step on four H100 hosts: its step is
near the host's pace, which autocast's own host work decides.

The measured savings are the device's; the predictions are today's code's."""

from __future__ import annotations

import functools

import pytest

from support import truth

_load = truth.own
#: today's whole JSON report of a fixture, made once
_report = functools.cache(truth.report)


#: fixture -> {fix: (measured, predicted or None, within)}
CALL = {
    "h100_real_classification_tv_oos1": {
        "amp": (14.30, 12.57, True),
        "channels-last": (13.92, 18.02, False),
        "workers-24": (0.27, None, True),
        "workers-8": (-0.26, None, True),
    },
    "h100_real_classification_tv_oos2": {
        "amp": (13.68, 10.23, False),
        "channels-last": (13.83, 10.89, True),
        "compile": (18.39, 15.78, True),
    },
    "h100_real_ddpm_unet_truth3": {"bf16": (12.52, 9.16, False), "channels-last": (-13.07, 4.52, False)},
    "h100_real_ddpm_unet_truth4": {"bf16": (8.82, 0.0, False), "channels-last": (-11.90, -4.79, False)},
    "h100_real_ddpm_unet_truth5": {"bf16": (2.23, 5.37, False), "channels-last": (-10.22, -8.12, True)},
    "h100_real_efficientnet_amp_truth2": {
        "bf16": (-29.37, -13.51, False),
        "channels-last": (54.05, 58.82, True),
    },
    "h100_real_efficientnet_amp_truth3": {
        "bf16": (-29.56, -26.63, True),
        "channels-last": (47.16, 51.97, True),
    },
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CALL))
def test_fixes_as_predicted(name):
    truth.check_rows(name, CALL[name])


def _remedy(report, key):
    return next(r for r in report["remedies"] if r["remedy"] == key)


def test_what_channels_last_timed_is_not_counted_again():
    """The channels_last remedy takes the `memory-bound-op` findings only on ops its what-if
    did not time in channels_last: call 1's probe timed the convolutions (their findings
    said 15.23 ms/step, the convolutions in channels_last 6.83), call 3's the BatchNorms too,
    whose findings then go as well; compile keeps the BatchNorm findings it also recovers."""
    first = _report("h100_real_classification_tv_oos1")
    third = _report("h100_real_classification_tv_oos2")
    for report, timed in ((first, 2), (third, 4)):
        cl = _remedy(report, "channels_last")
        w = report["gpu_whatif"]["channels_last_kernels"]
        assert len(w["ops"]) == timed
        ops_of = {report["findings"][i]["evidence"].get("op") for i in cl["findings"]}
        assert not ops_of & set(w["ops"])
        on_timed = [
            i for i, f in enumerate(report["findings"])
            if f["code"] == "memory-bound-op" and f["evidence"].get("op") in w["ops"]
        ]  # fmt: skip
        assert len(on_timed) == timed
    assert _remedy(third, "channels_last")["saving_ms_per_step"] == pytest.approx(
        third["gpu_whatif"]["channels_last_kernels"]["saving_ms"], abs=0.01
    )
    batch_norm = [
        i for i, f in enumerate(third["findings"])
        if f["code"] == "memory-bound-op" and "batch_norm" in str(f["evidence"].get("op"))
    ]  # fmt: skip
    assert set(batch_norm) <= set(_remedy(third, "compile")["findings"])


def test_group_norms_make_channels_last_a_loss():
    """The DDPM's GroupNorms timed in channels_last (their layout copies included) outweigh
    its convolutions' gain: the what-if is negative, the remedy last, and compile (where
    inductor would pick channels_last) would take the convolutions' part alone."""
    report = _report("h100_real_ddpm_unet_truth5")
    w = report["gpu_whatif"]["channels_last_kernels"]
    assert {"aten::native_group_norm", "aten::native_group_norm_backward"} <= set(w["ops"])
    assert w["saving_ms"] == pytest.approx(-8.12, abs=0.01)
    assert w["convolutions_saving_ms"] == pytest.approx(4.18, abs=0.01)
    assert w["inductor_picks_it"] is False
    assert report["remedies"][-1]["remedy"] == "channels_last"


def test_batch_norms_in_bf16_leave_cudnn():
    """EfficientNet-B0's fp16 BatchNorms timed in bf16 (under autocast, as the fix runs them)
    are among what bf16 changes: with the depthwise convolutions they predict the loss."""
    report = _report("h100_real_efficientnet_amp_truth3")
    w = report["gpu_whatif"]["bf16_kernels"]
    assert {"aten::cudnn_batch_norm", "aten::cudnn_batch_norm_backward"} <= set(w["ops"])
    assert w["kernel_ms_after"] > w["kernel_ms_before"] + 25
    assert _remedy(report, "bf16")["saving_ms_per_step"] < -20


def test_the_finding_pays_autocasts_host_work_as_its_remedy_does():
    """`tf32-matmul`'s one fix is bf16 autocast: its figure is at most what the remedy can
    save once autocast's host work is paid (the DDPM's 14.93 ms/step of TF32 kernel time
    removed, 5.37 saved; bf16 saved 2.23 on that host)."""
    report = _report("h100_real_ddpm_unet_truth5")
    f = next(f for f in report["findings"] if f["code"] == "tf32-matmul")
    assert f["evidence"]["kernel_ms_per_step"] == pytest.approx(14.93, abs=0.01)
    assert f["time_lost_ms_per_step"] == pytest.approx(5.37, abs=0.01)
    assert f["time_lost_ms_per_step"] <= _remedy(report, "bf16")["saving_ms_per_step"] + 1e-6


def test_the_top_remedy_of_the_recipe_is_its_best_fix():
    """classification_tv's top remedy is compile, which saved the most (18.39 ms/step)."""
    rows, _, _ = _load("h100_real_classification_tv_oos2")
    assert _report("h100_real_classification_tv_oos2")["remedies"][0]["remedy"] == "compile"
    assert max(rows, key=lambda k: rows[k]["measured_ms"]) == "compile"


def test_the_report_says_why_channels_last_loses():
    """The channels_last note splits the what-if (the convolutions save, the norms cost) and
    names the GroupNorm's missing channels_last kernel; where both parts go one way
    (EfficientNet's BatchNorms gain too) it says the whole alone."""
    ddpm = next(
        n for n in _report("h100_real_ddpm_unet_truth5")["notes"] if n.startswith("channels_last,")
    )
    assert "the convolutions save 4.18, the norms cost 12.30" in ddpm
    assert "GroupNorm has no channels_last kernel" in ddpm
    eff = next(
        n
        for n in _report("h100_real_efficientnet_amp_truth3")["notes"]
        if n.startswith("channels_last,")
    )
    assert "saves 51.97 ms/step" in eff and "the norms" not in eff
