"""The fourteenth session's H100 calls (2026-12-06, `bash benchmarks/gpu/session_dec07a.sh`,
then `TRUTH_ARGS=... bash benchmarks/gpu/truth.sh segmentation_tv` and `vit_timm` on the same
warm machine; the datasheet ceilings membound looks up where none were measured): compile
timed on two scripts whose compile no call had timed on this card, after compile's replay
(`analysis.compile_whatif`) was built from the recorded fixtures.

What they showed:
- torchvision's DeepLabV3 reference (`tests/fixtures/h100_real_segmentation_tv_truth1`):
  compile saved 14.43 ms of a 64.96 ms step (15.06 in the call before, on the same host),
  predicted 9.50 (9.44 before; the findings' sum would say 9.96): under-predicted, out of
  tolerance. channels_last, the top remedy and the top finding's fix, saved 12.51 (14.20):
  within, and within tolerance of compile's saving, a tie. pin_memory 8.16 (9.19), within.
- timm's ViT-B/16 (`tests/fixtures/h100_real_vit_timm_truth3`): compile saved 5.91 of 40.68,
  predicted 6.66 (the sum: 7.43), within; pinning 9.21 (8.95), within.
- On this host both captures stayed inside issue 15's targets: +3.6% and +2.0% over the
  unprofiled step, membound's unprofiled step +0.3% and -1.6% off the plain timer.
- In the same call (no fixture: its trace is 1.3 MB), the detection reference ran plain and
  under `membound diagnose` with hooks on and the profiler never started, alternated: 61.00,
  62.38, 60.42, 59.28 ms/step (plain, hooked, plain, hooked): the hooks do not slow it, and
  the 13.8% of the thirteenth session's call was that host's. Its compile (dynamic=True) did
  not finish compiling in 240 s.

The savings are the device's; the predictions are today's code's."""

from __future__ import annotations

import pytest

from support import truth

_load, _tolerance = truth.own, truth.tolerance


def test_deeplabv3_compile_under_predicted_and_channels_last_ties_it():
    rows, report, t = _load("h100_real_segmentation_tv_truth1")
    assert t["baseline_ms"] == pytest.approx(64.9589, abs=1e-3)
    measured = {k: round(r["measured_ms"], 2) for k, r in rows.items()}
    assert measured == {
        "channels-last": 12.51, "compile": 14.43, "log-every-100": -0.17, "pin-memory": 8.16,
    }  # fmt: skip
    assert report["findings"][0]["code"] == "memory-bound-op"
    assert report["remedies"][0]["remedy"] == "channels_last"
    assert rows["channels-last"]["predicted_ms"] == pytest.approx(14.20, abs=0.01)
    assert rows["channels-last"]["within"] and rows["pin-memory"]["within"]
    # compile's replay, out of sample: short by 4.9 ms; by 7.4 once the chains through
    # BatchNorm are not counted (twenty-fourth session: DeepLabV3's compile saved more than
    # the conv nets' compiled traces say fusion gives; no compiled trace of it was recorded)
    assert rows["compile"]["predicted_ms"] == pytest.approx(6.99, abs=0.01)
    assert not rows["compile"]["within"]
    best = max(rows.values(), key=lambda r: r["measured_ms"])
    assert best["fix"] == "compile"
    assert best["measured_ms"] - rows["channels-last"]["measured_ms"] <= _tolerance(
        best["measured_ms"]
    )


def test_vit_compile_within_out_of_sample():
    rows, report, t = _load("h100_real_vit_timm_truth3")
    assert t["baseline_ms"] == pytest.approx(40.6828, abs=1e-3)
    assert rows["compile"]["measured_ms"] == pytest.approx(5.91, abs=0.01)
    assert rows["compile"]["predicted_ms"] == pytest.approx(6.66, abs=0.01)
    assert rows["compile"]["within"] and rows["pin-mem"]["within"]
    assert report["findings"][0]["code"] == "pageable-copy"


@pytest.mark.parametrize("name", ["h100_real_segmentation_tv_truth1", "h100_real_vit_timm_truth3"])
def test_the_capture_stayed_inside_issue_15s_targets_on_this_host(name):
    rows, report, _ = _load(name)
    assert report["profiler_overhead_fraction"] <= 0.10
    assert all(abs(r["diagnose_off"]) <= 0.05 for r in rows.values())
