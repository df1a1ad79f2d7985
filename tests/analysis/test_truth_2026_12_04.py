"""Truth by intervention out of sample, 2026-12-04: three scripts written that day
(examples/real/tabular_mlp.py, vit_timm.py, bert_finetune.py) were diagnosed and timed with
each fix on the H200 before any rule was changed for them (`benchmarks/gpu/session_dec04{a,b}.sh`,
fixtures `h200_real_*_oos1`); BERT ran again after the change (`session_dec04c.sh`, `_oos2`;
`session_dec04d.sh`, `_oos3`, with the profiler's host cost measured).
What they showed, and what changed:

- BERT-base in fp32 (GPU busy 94%): `fp32-matmul` summed 45.7 ms/step of matmul time above the
  TF32 roof; TF32 saved 29.4 and bf16 autocast 27.8. The step settled near the host's own
  time. The GPU what-if (`analysis/gpu_whatif.py`) replays the timeline with shorter kernels:
  read through it, the finding predicts 29.6.
- The tabular MLP (a TensorDataset behind a default DataLoader, GPU busy 4%): `input-starved`
  was remedied by `membound.data.prefetch`, predicted 5.96, measured 0.85: the loader's
  collate runs on the training thread, and a prefetch thread shares its interpreter. With a
  single-process loader the remedy is workers (measured 3.96 with 4).

Predictions are what `bench_truth.predict` makes of today's report (`benchmarks/truth_tally.py`);
measured savings are the device's, in each fixture's truth.json."""

from __future__ import annotations

import numpy as np
import pytest

from membound.analysis import gpu_whatif
from membound.analysis.remedies import combined, remedies_of
from membound.device.ceilings import Ceilings
from support.paths import H200_CEILINGS
from support.truth import analysis as _analysis
from support.truth import rows as _rows


@pytest.fixture(scope="module")
def ceilings():
    return Ceilings.load(H200_CEILINGS)


def test_bert_fp32_matmul_is_read_through_the_gpu_whatif(ceilings):
    a = _analysis("bert_finetune_oos1", ceilings)
    top = a.findings[0]
    assert top.code == "fp32-matmul"
    assert top.evidence["kernel_ms_per_step"] == pytest.approx(44.79, abs=0.01)
    assert top.time_lost_ms_per_step == pytest.approx(29.61, abs=0.01)
    assert top.expected_step_ms_after_fix == pytest.approx(
        a.unprofiled_step_ms - top.time_lost_ms_per_step
    )
    c = a.gpu_whatif
    assert c is not None and c["kernel_ms_per_step"] == pytest.approx(57.59, abs=0.01)
    # the curve never saves more than it removes, never falls, and starts at zero
    assert c["saving_ms"][0] == 0.0 and np.all(np.diff(c["saving_ms"]) >= 0)
    assert all(s <= r + 1e-6 for r, s in zip(c["removed_ms"], c["saving_ms"], strict=True))
    rems = a.remedies
    assert [r.key for r in rems[:2]] == ["tf32", "bf16"]
    rows = _rows("bert_finetune_oos1", ceilings)
    for fix, measured in (("tf32", 29.41), ("bf16", 27.76)):
        assert rows[fix]["measured_ms"] == pytest.approx(measured, abs=0.01)
        assert rows[fix]["predicted_ms"] == pytest.approx(29.61, abs=0.01)
        assert rows[fix]["within"]
    # compile removes kernels, and with them the host's work of launching them: not read
    # through the curve (2.66 predicted as the findings' sum, 2.92 measured); since the
    # fourteenth session from its own replay (`analysis.compile_whatif`), 1.20
    assert rows["compile"]["within"] and rows["compile"]["predicted_ms"] == pytest.approx(
        1.20, abs=0.01
    )


def test_bert_second_run_under_predicted(ceilings):
    """The same script in call 3 (busy 86%): the curve's floor is the host's time in the
    profiled timeline, 56.3 ms/step; bf16 brought the step to 50.5. Predicted 9.31, measured
    13.50: a miss by 4.2 ms. The calibration read no profiler cost (the GPU set the pace);
    the cost measured on the H200 in call 4 is ~1 us per call (`trace.profiler_cost`), which
    moves this prediction by under 2 ms: the profiler's hidden cost is not what the floor
    got wrong."""
    a = _analysis("bert_finetune_oos2", ceilings)
    assert a.gpu_whatif["profiler_cost_per_call_us"] == 0.0  # no measurement in this meta
    rows = _rows("bert_finetune_oos2", ceilings)
    assert rows["bf16"]["measured_ms"] == pytest.approx(13.50, abs=0.01)
    assert rows["bf16"]["predicted_ms"] == pytest.approx(9.31, abs=0.01)
    assert not rows["bf16"]["within"]


def test_bert_third_run_with_the_measured_profiler_cost(ceilings):
    """Call 4: diagnose measured the timeline profiler's host cost after the script (1.025 us
    per call, in the meta) and the curve took it off. Predicted 28.01 for TF32; TF32
    measured 35.76 (within). bf16 measured 21.15: autocast's casts and dispatch are host
    work of their own. With that work priced (2026-12-05, seventh session:
    `gpu_whatif.AUTOCAST_LAUNCHES_PER_KERNEL` x 813 kernels a step x the 7.373 us a launch
    measured here = 2.40 ms) bf16 is predicted 25.61: within (28.01 before, not). On three
    runs of one script TF32 saved 29.4 and 35.8, bf16 27.8, 13.5 and 21.2: the host the loop
    lands on moves the answer by more than the tolerance."""
    a = _analysis("bert_finetune_oos3", ceilings)
    assert a.gpu_whatif["profiler_cost_per_call_us"] == pytest.approx(1.025)
    assert a.gpu_whatif["kernels_per_step"] == 813
    assert a.gpu_whatif["autocast_host_ms"] == pytest.approx(0.4 * 813 * 7.373e-3, abs=1e-3)
    assert a.findings[0].code == "fp32-matmul"
    assert a.findings[0].time_lost_ms_per_step == pytest.approx(28.01, abs=0.01)
    rows = _rows("bert_finetune_oos3", ceilings)
    assert rows["tf32"]["within"] and rows["bf16"]["within"]
    assert rows["bf16"]["predicted_ms"] == pytest.approx(25.61, abs=0.01)
    assert rows["tf32"]["predicted_ms"] == pytest.approx(28.01, abs=0.01)
    assert rows["tf32"]["measured_ms"] == pytest.approx(35.76, abs=0.01)
    assert rows["bf16"]["measured_ms"] == pytest.approx(21.15, abs=0.01)


def test_tabular_single_process_loader_is_remedied_by_workers(ceilings):
    a = _analysis("tabular_mlp_oos1", ceilings)
    starved = next(f for f in a.findings if f.code == "input-starved")
    assert starved.evidence["multiprocess_workers"] is False
    # the ops pass's __next__: 6144 aten::select in its 3 batches, two tensors x 1024 rows
    assert starved.evidence["row_ops_per_batch"] == 2048 and starved.evidence["per_row_collate"]
    assert "BatchSampler" in starved.fix and "prefetch" not in starved.fix
    assert remedies_of("input-starved", starved.evidence) == ("batch_index", "workers")
    assert [r.key for r in a.remedies[:2]] == ["batch_index", "workers"]
    # host-bound: kernels taking no time at all would not shorten the step
    assert a.gpu_whatif["saving_ms"][-1] == pytest.approx(0.0, abs=1e-6)
    rows = _rows("tabular_mlp_oos1", ceilings)
    assert rows["num-workers-4"]["within"]  # 5.85 predicted, 3.96 measured
    assert rows["batch-index"]["within"]  # 5.85 predicted, 5.28 measured
    assert rows["membound-prefetch"]["within"]  # 0.11 (its pageable copies), 0.85 measured
    # compile made this loop slower (-2.11) where launch-bound said 2.12; compile's replay
    # (fourteenth session, `analysis.compile_whatif`: 57 fusible launches a step, 22 of them
    # fused away, less the compiled runtime's own cost) predicts it to lose 0.35: within
    assert rows["compile"]["within"]
    assert rows["compile"]["measured_ms"] < 0 and rows["compile"]["predicted_ms"] < 0


def test_tabular_second_run_workers_predicted_before_timed(ceilings):
    """Call 5, after the change: the report said workers 6.50 ms/step before the fixes ran;
    4 workers saved 4.52 (within). membound's prefetch saved 2.53 against the 0.12 its
    pageable copies predict (a miss; 0.85 in the first run). The host is noisy on this loop:
    the three baselines were 11.13, 10.16 and 6.64 ms."""
    a = _analysis("tabular_mlp_oos2", ceilings)
    assert [r.key for r in a.remedies[:2]] == ["batch_index", "workers"]
    assert a.remedies[1].saving_ms_per_step == pytest.approx(6.50, abs=0.01)
    rows = _rows("tabular_mlp_oos2", ceilings)
    assert rows["num-workers-4"]["within"] and not rows["membound-prefetch"]["within"]
    # whole-batch indexing (named by the rule added after this run was timed): 6.50
    # predicted, 3.38 measured: a miss
    assert not rows["batch-index"]["within"]
    assert rows["num-workers-4"]["measured_ms"] == pytest.approx(4.52, abs=0.01)


def test_input_starved_remedy_follows_the_loaders_workers():
    assert remedies_of("input-starved", {"multiprocess_workers": True}) == ("prefetch",)
    assert remedies_of("input-starved", {"multiprocess_workers": False}) == ("workers",)
    per_row = {"multiprocess_workers": False, "per_row_collate": True}
    assert remedies_of("input-starved", per_row) == ("batch_index", "workers")
    assert remedies_of("input-starved", {}) == ("prefetch",)  # a report that does not say


def test_curve_reads_only_the_remedies_that_leave_the_host_alone():
    """TF32 and bf16 read their GPU-work saving through the curve; a remedy that removes
    kernels (compile) keeps the sum, since it also removes the host's launches."""
    from types import SimpleNamespace as F

    curve = {"removed_ms": [0.0, 10.0, 20.0], "saving_ms": [0.0, 4.0, 5.0]}
    matmul = F(code="fp32-matmul", evidence={}, time_lost_ms_per_step=20.0)
    mem = F(code="memory-bound-op", evidence={"op": "aten::add"}, time_lost_ms_per_step=6.0)
    assert combined([matmul], ["tf32"], None, curve) == pytest.approx(5.0)
    assert combined([matmul], ["tf32"], None, None) == pytest.approx(20.0)
    assert combined([mem], ["compile"], None, curve) == pytest.approx(6.0)
    assert gpu_whatif.saving(curve, 5.0) == pytest.approx(2.0)
    assert gpu_whatif.saving(curve, 50.0) == pytest.approx(5.0)  # past the curve: its end
    assert gpu_whatif.saving(None, 7.0) == 7.0
    # a mix (HF's torch_compile=True turns TF32 on too): each part as applied alone, the
    # TF32 part through the curve, compile's as it is; it once summed 20 + 6 with no curve
    assert combined([matmul, mem], ["compile", "tf32"], None, curve) == pytest.approx(11.0)
    assert combined([matmul, mem], ["compile", "tf32"], 9.0, curve) == pytest.approx(9.0)
    assert combined([matmul, mem], ["compile", "tf32"], None, None) == pytest.approx(26.0)


def test_vit_gpu_work_saves_little_on_a_host_paced_step(ceilings):
    """timm's ViT-B/16 with pageable fp32 batches (busy 65%): the host blocks in the copy
    and syncs every step; the replay says faster kernels alone would save at most 1.1 ms."""
    a = _analysis("vit_timm_oos1", ceilings)
    assert a.gpu_whatif["saving_ms"][-1] == pytest.approx(1.10, abs=0.01)
    assert a.findings[0].code == "pageable-copy"
    rows = _rows("vit_timm_oos1", ceilings)
    assert rows["log-every-100"]["within"]
    # under-predicted: pinning saved 10.64 and membound's prefetch 12.40 against 7.80
    assert not rows["pin-mem"]["within"] and not rows["membound-prefetch"]["within"]
    # membound's norms on this host-paced loop: the what-if replays their measured host cost
    # (476 us per fwd+bwd against ATen's 151) at each norm launch: -7.13, measured -16.43;
    # the sign keeps swap_norms out of the remedies, the size is half the loss
    assert rows["swap-norms"]["predicted_ms"] == pytest.approx(-7.13, abs=0.01)
    assert rows["swap-norms"]["measured_ms"] == pytest.approx(-16.43, abs=0.01)
    assert "swap_norms" not in [r.key for r in a.remedies if r.saving_ms_per_step > 0]
