"""The twenty-fourth session's H100 call (2026-12-07; the datasheet ceilings):
`SESSION_S=550 bash benchmarks/gpu/session_dec18a.sh`, the top remedies the H100 calls had
never timed, through `benchmarks/bench_truth.py` (which also times each diagnose report's own
top remedy). With them every H100 script's top remedy has been timed at least once, and on
all 17 it is the best fix or within the noise of it (`benchmarks/truth_tally.py --card h100`).

- `h100_real_dcgan_truth2`: the DCGAN (GPU busy 40%). The top remedy, prefetch, is the best
  fix: membound's prefetcher saved 1.35 ms/step (3.05 predicted: within the 2 ms floor).
  CUDA graphs (reduce-overhead) saved 0.47 against 3.03 predicted by launch-bound's idle
  (out); since this session the remedy pays the compiled runtime its mode runs each step
  (`remedies.GRAPH_RUNTIME_MS`): 1.93, within. The profiler's
  overhead was 10.7% here, over issue 15's 10%.
- `h100_real_resnet50_fp32_truth2`: torchvision's ResNet-50 in fp32 (GPU busy 97%).
  channels_last saved 18.06 (16.94 predicted, within); the top remedy, compile, saved 24.69,
  the best fix, but 35.04 was predicted: out, like the DDPM U-Net's and the ConvNeXt's.
  Its compiled trace (`test_compiled_resnet50.py`) showed why: since this session the
  chains through BatchNorm are not counted, and 25.79 is predicted: within.
- `h100_real_bert_finetune_truth2`: the BERT fine-tune (GPU busy 93%). TF32 saved 32.87,
  the best fix, against 21.50 predicted: out. The replay's host work (the recorded gaps and
  calls, 41.2 ms/step once every kernel is gone) caps the saving; the plain timer put the
  step with TF32 at 30.22 ms/step, 11 ms under that host work. The H200 BERT runs were
  within (29.41 against 29.61, 35.76 against 28.01). `session_dec18b.sh` diagnoses the TF32
  variant, to see which host work went.

The measured savings are the device's; the predictions are today's code's."""

from __future__ import annotations

import functools

import pytest

from support import truth

_report = functools.cache(truth.report)


def test_dcgan_prefetch_on_top_and_within():
    truth.check_rows(
        "h100_real_dcgan_truth2",
        {
            "membound-prefetch": (1.35, 3.05, True),
            "reduce-overhead": (0.47, 1.93, True),
            "channels-last": (-0.11, 0.45, True),
        },
    )
    rows, report, _ = truth.own("h100_real_dcgan_truth2")
    assert rows["membound-prefetch"]["top_remedy"] == "prefetch"
    assert report["profiler_overhead_fraction"] == pytest.approx(0.107, abs=1e-3)


def test_resnet50_fp32_compile_is_the_best_fix_and_within():
    truth.check_rows(
        "h100_real_resnet50_fp32_truth2",
        {
            "channels-last": (18.06, 16.94, True),
            "compile": (24.69, 25.79, True),
            "tf32": (0.29, None, True),
        },
    )
    rows, _, _ = truth.own("h100_real_resnet50_fp32_truth2")
    assert rows["compile"]["top_remedy"] == "compile"


def test_bert_tf32_is_capped_by_the_replayed_host_work():
    truth.check_rows("h100_real_bert_finetune_truth2", {"tf32": (32.87, 21.50, False)})
    curve = _report("h100_real_bert_finetune_truth2")["gpu_whatif"]
    # the curve flattens where the replay has the host pace the step: 62.68 - 21.50 = 41.18
    assert curve["saving_ms"][-1] == pytest.approx(21.50, abs=0.01)
    assert curve["step_ms"] - curve["saving_ms"][-1] == pytest.approx(41.18, abs=0.01)
    # the plain timer's step with TF32, from the same call: 63.09 - 32.87
    _, _, measured = truth.own("h100_real_bert_finetune_truth2")
    assert measured["baseline_ms"] - 32.87 == pytest.approx(30.22, abs=0.01)


def test_bert_tf32_variant_replays_to_less_host_work():
    """The TF32 variant diagnosed in the next call (`h100_tf32_bert_finetune`,
    `session_dec18b.sh`, another H100 host): its replay with every kernel gone leaves 30.28
    ms/step of host work, where the fp32 trace's leaves 41.18; the plain timer ran the TF32
    step at 30.22. Either the host's recorded work shrinks when the GPU's does or the two
    hosts differ by a third: one call must diagnose both variants to tell (the next
    session's `session_dec18b.sh` run)."""
    fp32 = _report("h100_real_bert_finetune_truth2")["gpu_whatif"]
    tf32 = _report("h100_tf32_bert_finetune")["gpu_whatif"]
    host = [c["step_ms"] - c["saving_ms"][-1] for c in (fp32, tf32)]
    assert host == [pytest.approx(41.18, abs=0.01), pytest.approx(30.28, abs=0.01)]
    # TF32 took the kernels from 59.43 to 22.22 ms/step
    assert (fp32["kernel_ms_per_step"], tf32["kernel_ms_per_step"]) == (
        pytest.approx(59.43, abs=0.01),
        pytest.approx(22.22, abs=0.01),
    )
