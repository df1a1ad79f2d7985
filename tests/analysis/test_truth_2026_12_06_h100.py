"""Two truth calls on an H100 (2026-12-06, ninth session; the machine that came was an H100,
with the datasheet ceilings membound looks up where none were measured), each a
`benchmarks/bench_truth.py` run: the plain-timer baselines, membound's diagnose and the fixes,
timed in the same call. Kept apart from the H200 tally (`benchmarks/truth_tally.py`).

- `h100_real_ddpm_unet_truth1`: `bash benchmarks/gpu/truth.sh ddpm_unet,lstm_lm`, the DDPM
  CIFAR U-Net written in the eighth session and measured here for the first time (out of
  sample: no rule was changed for it before or after). A second round in a later call of the
  same machine (bf16 11.69, compile 11.16, log-every-100 1.74 ms/step saved against a 66.92
  baseline; `benchmarks/results/truth.csv`, run truth-20261206T003707) agrees within 0.6 ms.
- `h100_real_t5_seq2seq_truth4`: `TRUTH_ARGS="--fixes tf32,bf16,torch-compile" bash
  benchmarks/gpu/truth.sh t5_seq2seq`, the HF T5 on a host fast enough that the GPU nearly
  paced it (81% busy), where the H200's and the other H100s' T5 runs were host-bound.

The savings are the device's; the predictions are today's code's."""

from __future__ import annotations

import pytest

from membound.device.ceilings import Ceilings
from support import truth
from support.truth import truth_tally

_load, _tolerance = truth.own, truth.tolerance


def test_ddpm_unet_out_of_sample_top_remedy_ties_the_best_fix():
    """The U-Net (35.7M parameters, GroupNorm and SiLU between convolutions, fp32, a loss.item()
    and a per-parameter EMA every step) at 66.31 ms/step, GPU busy 88%.

    - The top remedy, torch.compile, saved 10.57 ms/step; the best fix, bf16 autocast, 11.38:
      within the tolerance of each other, so the first remedy is right.
    - Its prediction is not: 17.18 for compile (16.71 since the EMA's chains are the loop's
      own, not the model's), 6.28 for bf16 (6.22), and 5.06 for logging every 100 steps
      (measured 1.28). TF32 is within (2.96 against 2.02).
    - The fixes no remedy names saved little or lost: channels_last -12.93 (slower), SDPA
      -1.94, pin_memory 1.12, membound's prefetch 1.34. The foreach EMA saved 0.82: since the
      tenth session its own finding predicts 0.90.
    - The logging miss is the replay's: it packs queued kernels end to end, where the trace
      shows ~1.4 us of turnaround between them (2,679 kernels a step). Replaying with the
      trace's turnaround gave 2.05 here (within) but took the eager GPT-2's sync savings
      (1.47-2.71 measured) to nothing and put the H200 tally at 83 of 130 where it stood at
      87: the profiled trace's turnaround is likely more than the unprofiled GPU's
      (`benchmarks/probe_turnaround.py` measures both). Not landed."""
    rows, report, truth = _load("h100_real_ddpm_unet_truth1")
    assert truth["baseline_ms"] == pytest.approx(66.3135, abs=1e-3)
    assert report["profiler_overhead_fraction"] == pytest.approx(0.0377, abs=1e-3)
    assert report["profiler_overhead_fraction"] <= 0.10  # issue 15's target, on this loop
    assert report["findings"][0]["code"] == "memory-bound-op"
    assert report["remedies"][0]["remedy"] == "compile"
    best = max(rows.values(), key=lambda r: r["measured_ms"])
    assert best["fix"] == "bf16"
    top = rows["compile"]
    assert best["measured_ms"] - top["measured_ms"] <= _tolerance(best["measured_ms"])
    # 17.18 before the EMA's chains were told apart from the model's (test_model_reach.py),
    # 16.71 before the launch gaps in front of the loop's own chains left launch-bound
    # (analysis.kernel_map: 0.04 ms/step, before the batch's preparation)
    # 16.67 before the launch gaps inside one library call were left to CUDA graphs
    # 16.58 before compile was read from its own replay (fourteenth session,
    # `analysis.compile_whatif`): 15.45, still above the 10.57 measured; 11.71, within, once
    # the chains through a GroupNorm were not counted (twenty-fourth session)
    assert top["predicted_ms"] == pytest.approx(11.71, abs=0.01) and top["within"]
    assert rows["bf16"]["predicted_ms"] == pytest.approx(6.22, abs=0.01)
    assert not rows["bf16"]["within"]
    assert rows["log-every-100"]["predicted_ms"] == pytest.approx(5.06, abs=0.01)
    assert not rows["log-every-100"]["within"]
    assert rows["tf32"]["within"]
    unnamed = ("channels-last", "sdpa")
    assert all(rows[f]["predicted_ms"] is None for f in unnamed)
    # the EMA's own finding (test_model_reach.py): 0.90 predicted against 0.82
    assert rows["foreach-ema"]["predicted_ms"] == pytest.approx(0.90, abs=0.01)
    assert rows["foreach-ema"]["within"]
    assert rows["channels-last"]["measured_ms"] == pytest.approx(-12.93, abs=0.01)
    # membound's unprofiled step against the plain timer's: within 1%
    assert abs(rows["bf16"]["diagnose_off"]) <= 0.01


def test_t5_on_a_gpu_paced_h100_tf32_bf16_and_compile_with_its_tf32_within():
    """The T5 at 68.40 ms/step (two baselines 0.3% apart), 81% busy: the capture added 4.7%
    (membound's own step timer; +5.0% against the plain timer), where the same loop on
    host-bound machines took +17 to +36%. TF32 (22.25 measured, 20.81 predicted) and bf16
    (16.65, 16.02) are within.

    torch.compile saved 37.42, more than TF32 alone: `Seq2SeqTrainingArguments(torch_compile=
    True)` also turns TF32 on (transformers' `TrainingArguments.__post_init__`, where `tf32`
    is unset and fp16 off: "Setting TF32 in CUDA backends to speedup torch compile"). The
    truth bench named that fix compile alone and compared it with compile's 13.16; it is
    compile and TF32 together. `remedies.combined` then summed the raw kernel time of both
    (49.81, no curve for a mix); it now takes each part as applied alone, TF32's through the
    GPU what-if: 33.97, within. On the H200's host-paced T5 the same gives 32.29 against
    32.06, where TF32 alone over-predicts (15.88 vs 4.55) and compile alone under-predicts
    (16.41): the two errors cancel there, so the sum is right for a reason the parts are
    not. The top remedy (tf32) is not the best fix here. Since the fourteenth session
    compile's replay (`analysis.compile_whatif`) takes the kernel time TF32 removes into the
    same replayed step: 38.63 (H100) and 34.49 (H200), both within."""
    rows, report, truth = _load("h100_real_t5_seq2seq_truth4")
    assert truth["baseline_ms"] == pytest.approx(68.4004, abs=1e-3)
    assert report["profiler_overhead_fraction"] == pytest.approx(0.0475, abs=1e-3)
    assert report["remedies"][0]["remedy"] == "tf32"
    assert rows["tf32"]["within"] and rows["bf16"]["within"]
    assert rows["tf32"]["predicted_ms"] == pytest.approx(20.81, abs=0.01)
    assert rows["bf16"]["predicted_ms"] == pytest.approx(16.02, abs=0.01)
    c = rows["torch-compile"]
    assert c["fix_remedies"] == "compile+tf32" and c["predicted_by"] == "tf32+compile"
    assert c["measured_ms"] == pytest.approx(37.42, abs=0.01)
    assert c["predicted_ms"] == pytest.approx(38.63, abs=0.01) and c["within"]
    assert c["measured_ms"] > rows["tf32"]["measured_ms"]


def test_h100_tally_kept_apart_and_a_combined_fix_is_not_the_top_remedys():
    """`benchmarks/truth_tally.py --card h100`: the calls that came on H100s, each on the
    ceilings it kept (else the datasheet's): 16 of 30 within (15 of 22 before the eleventh
    session's ConvNeXt and LSTM, `test_truth_2026_12_06b_h100.py`, which added one); 19 of 32
    since the twelfth session: the LSTM's compile within once the gaps inside cuDNN's RNN
    calls went to CUDA graphs, and the LSTM's second call (whole-step graph and logging,
    both within); 24 of 37 with the MNIST loop (`test_truth_2026_12_06d_h100.py`), 26 of 40
    with the GCN (`test_truth_2026_12_06e_h100.py`), 29 of 43 with the ViT's two calls
    (`test_truth_2026_12_06f_h100.py`); 36 of 51 with the thirteenth session's CIFAR
    ResNet-18 (`test_truth_2026_12_06g_h100.py`: 7 of its 8 fixes within, compile not); 39
    of 51 once compile is read from its own replay (fourteenth session,
    `analysis.compile_whatif`: the DCGAN's, the GCN's and the CIFAR ResNet-18's compile
    predicted to lose or save nothing, as they measured); 44 of 57 with the fourteenth
    session's DeepLabV3 and ViT calls (`test_truth_2026_12_06h_h100.py`: compile under-predicted
    on the DeepLabV3); 50 of 66 with the fifteenth session's fused optimizers
    (`test_truth_2026_12_06i_h100.py`: 5 of the 9 new rows within, the ConvNeXt's first call's
    fused AdamW within once the optimizer's replay and the replay's async copies were mended);
    51 of 68 with the sixteenth session's three-round fused optimizers
    (`test_truth_2026_12_06j_h100.py`: the DeepLabV3's within, the ViT's not); 59 of 84 with
    the out-of-sample DLRM and EfficientNet-B0 (`test_truth_2026_12_06k_h100.py`: 8 of 16);
    63 of 84 once steps of different lengths were aligned (`analysis.kernel_map`), the
    optimizer's own loop made a finding apart from the EMA's and a loader building batches item
    by item offered batch indexing (the EfficientNet's compile and two loops, the DLRM's
    batch indexing); 63 of 89 with the eighteenth session's out-of-sample wav2vec2
    (`test_truth_2026_12_06l_h100.py`: 0 of 5 within, four of its fixes unpredicted); 65 of
    91 with the nineteenth session's same-call T5 and ViT (`test_truth_2026_12_07_h100.py`:
    TF32 and pinning, both within); 74 of 108 with the twenty-second session's
    classification recipe, DDPM and EfficientNet calls (`test_truth_2026_12_07b_h100.py`: 9
    of 17 within, bf16 and channels_last read from the kernels and norms timed after the
    script); 76 of 112 with the twenty-third session's compile on the DDPM and EfficientNet
    (`test_truth_2026_12_07c_h100.py`: EfficientNet's two within, the DDPM's not); 77 of 113
    with its T5 (`test_truth_2026_12_07d_h100.py`: bf16 within on autocast's host work
    measured on the machine); 81 of 120 with the twenty-fourth session's DCGAN, ResNet-50 fp32
    and BERT (`test_truth_2026_12_07e_h100.py`: 4 of 7 within; compile and TF32, the best
    fixes of the last two, under- and over-predicted); 82 of 120 once CUDA graphs pay the
    compiled runtime of mode='reduce-overhead' (the DCGAN's second call within); 85 of 120
    once the chains through a BatchNorm or GroupNorm are not counted (the DDPM's two compile
    rows and the ResNet-50's within, `test_compiled_resnet50.py`); 87 of 122 with the
    twenty-fifth session's BERT diagnosed with sleeping syncs (`test_truth_2026_12_07f_h100.py`:
    TF32 and bf16 within, the profiler's host cost read from the threads' CPU); 92 of 130 with
    the twenty-seventh session's calls diagnosed with `--syncs sleep-profiled`
    (`test_truth_2026_12_07g_h100.py`: 5 of 8 within, the BERT's two among them; the T5's two
    out on a host whose baselines ran 15% apart); 94 of 133 with the twenty-eighth session's HF
    Llama and Lightning fit (`test_truth_2026_12_08_h100.py`: the Llama's two within, the
    Lightning's bf16-mixed unpredicted on a host whose baselines ran 16% apart).
    The T5's top remedy, TF32, is judged by the TF32 run (22.25), not by HF's torch_compile, which
    applies TF32 with compile (37.42): a fix that applies the top remedy alone is its fix
    where one was timed."""
    c = Ceilings.load(truth_tally.CARDS["h100"])
    rows = []
    for folder in truth_tally.fixtures(card="h100"):
        rows += truth_tally.rows_of(folder, truth_tally.ceilings_of(folder, c))
    assert len(rows) == 133 and sum(r["within"] for r in rows) == 94
    # where the call's baselines agreed within the saving's tolerance: 77 of 99 (34 rows
    # whose baselines ran further apart, 17 of them within)
    calm = [r for r in rows if truth_tally.steady_baselines(r)]
    assert (len(calm), sum(r["within"] for r in calm)) == (99, 77)
    tops = {t["fixture"]: t for t in truth_tally.top_verdicts(rows)}
    t5 = tops["h100_real_t5_seq2seq_truth4"]
    assert t5["top_remedy"] == "tf32" and t5["verdict"] == "NO"
    assert t5["top_fix_ms"] == pytest.approx(22.25, abs=0.01)
    assert tops["h100_real_ddpm_unet_truth1"]["verdict"] == "tie"
    # 9 of 13 fixtures (the CIFAR ResNet-18's compile ties its best fix, bf16 autocast: every
    # fix there saved under 1 ms); 5 of 7 before the twelfth session's LSTM, MNIST, GCN and
    # ViT calls; 10 of 15 with the fourteenth session's DeepLabV3 (channels_last on top ties
    # compile, the best fix) and ViT (the top remedy, prefetch, untimed in that call); 10 of
    # 22 with the fifteenth session's seven, which timed a fused optimizer alone (and the
    # ConvNeXt's bf16): their top remedies untimed in those calls; 12 of 26 with the sixteenth
    # session's four: the DLRM's workers tie its best fix, the EfficientNet's compile is its
    # best fix; 13 of 27 with the wav2vec2, whose top remedy (workers) is its best fix; 13 of
    # 29 with the nineteenth session's T5 and ViT, whose top remedies (compile, the
    # prefetcher) were not timed in that call; 14 of 36 with the twenty-second session's
    # seven: the classification recipe's compile, timed in its second call, is its best fix;
    # the others' top remedy (compile) was not timed; 16 of 38 with the twenty-third
    # session's DDPM and EfficientNet calls, where compile, on top, was timed and is the best
    # fix on both; 19 of 42 with the twenty-fourth session's DCGAN, ResNet-50 fp32 and BERT,
    # whose top remedies (prefetch, compile, TF32), timed at last, are each the best fix; 20
    # of 43 with the twenty-fifth session's BERT (TF32 on top, the best fix); 22 of 48 with
    # the twenty-seventh session's BERT and T5 (TF32 on top of both, the best fix timed); 23 of
    # 50 with the twenty-eighth session's HF Llama (compile on top, timed as HF's
    # torch_compile, which turns TF32 on in a bf16 loop: the best fix) and Lightning fit (its
    # top remedy, the prefetcher, not timed in that call)
    assert sum(t["verdict"] in ("yes", "tie") for t in tops.values()) == 23
    assert tops["h100_real_segmentation_tv_truth1"]["verdict"] == "tie"
    # per script, 16 of 17: the T5's fixtures now vote TF32 on top (3 of 5), whose saving
    # averages 15.43 over its calls (9.05 on the drifting host of the twenty-seventh session),
    # where HF's torch_compile, which applies TF32 with compile, saved 37.42 in its one call
    per = {t["script"]: t for t in truth_tally.script_verdicts(rows)}
    # (17 of 18 with the HF Llama, whose top remedy, compile, is its best fix)
    assert sum(t["verdict"] in ("yes", "tie") for t in per.values()) == 17 and len(per) == 18
    assert per["hf_trainer_llama"]["top_remedy"] == "compile"
    assert per["hf_trainer_llama"]["verdict"] == "yes"
    assert per["t5_seq2seq"]["top_remedy"] == "tf32" and per["t5_seq2seq"]["verdict"] == "NO"
