"""The nineteenth session's first H100 call (2026-12-07, `bash benchmarks/gpu/session_dec11a.sh`,
asked as an H200; an H100 came): `membound roofline --refresh`, then three real loops under
`diagnose` on those ceilings in the same call, each with one fix timed against two plain-timer
baselines (bench_truth `--quick`).

What it showed:
- The refresh took 52.5 s of measurement (60 s command to end): bf16 matmul 891 TFLOP/s at its
  best shape, HBM 3.15 TB/s copy, 3.09 read, 3.39 write.
- On those ceilings no op of the three traces is above its roof; the nearest are inductor
  kernels of the compiled GPT-2 (`_to_copy_add_19` at 98.9% of HBM's).
- The T5 (HF Seq2SeqTrainer, fp32): TF32 saved 10.26 ms/step, fp32-matmul predicted 10.93.
  Its top remedy is compile (29.75 predicted). In the third call of the same machine (no
  fixture: traces not kept) `torch_compile=True`, which turns TF32 on too, saved 34.42
  against 39.03 predicted for the pair (within); compile without TF32 is not measured yet.
- The timm ViT-B/16 (8 workers, pageable batches): pinning saved 16.60, pageable-copy
  predicted 15.71 (its top finding; the top remedy, the prefetcher, saved 14.15 in the fifth
  call against 12.83 predicted, pinning 13.54 against 12.03).
- The compiled GPT-2 (inductor, grad-accum 4): costed 99.997% of GPU op time; its fix was
  skipped for time in this call. In two later calls on the same machine bf16 weights with fp32
  master weights (its top finding, fp32-storage) saved 7.10 and 7.14 against 9.14 and 9.11
  predicted by the bf16_storage remedy."""

from __future__ import annotations

import json

import pytest

from membound.analysis import analyze
from membound.device.ceilings import Ceilings
from membound.trace.capture_meta import timeline_in
from support import truth
from support.paths import FIXTURES

T5, VIT = "h100_real_t5_seq2seq_truth5", "h100_real_vit_timm_truth6"
COMPILED = "h100_samecall_gpt2_compiled"
SAME_CALL = (T5, VIT, COMPILED)


def test_the_three_traces_keep_the_same_calls_ceilings():
    texts = {(FIXTURES / n / "ceilings.json").read_text() for n in SAME_CALL}
    assert len(texts) == 1
    c = json.loads(texts.pop())["device"]["ceilings"]
    assert c["name"] == "NVIDIA H100 80GB HBM3"
    assert c["seconds"] < 60  # issue 16: a refresh within a minute
    assert c["flops"]["bf16"] == pytest.approx(890.63e12, rel=1e-4)
    assert c["memory_bandwidth"] == pytest.approx(3.1504e12, rel=1e-4)
    # the sweep's shapes, as issue 16 asks (4096^3, 8192^3, 16384x16384x4096, a tall-skinny one)
    shapes = {tuple(s) for s in _sweep_shapes(c["matmul_sweep"])}
    assert {(4096, 4096, 4096), (8192, 8192, 8192), (16384, 16384, 4096)} <= shapes
    assert any(max(s) >= 16 * min(s) for s in shapes)


def _sweep_shapes(sweep) -> list[list[int]]:
    out = []
    for rows in sweep.values():
        for row in rows:
            out.append([int(row["m"]), int(row["n"]), int(row["k"])])
    return out


@pytest.mark.parametrize("name", SAME_CALL)
def test_no_op_is_above_its_roof_on_the_same_calls_ceilings(name):
    folder = FIXTURES / name
    a = analyze([timeline_in(folder)], Ceilings.load(folder / "ceilings.json"))
    worst = max(
        max(r.achieved_bandwidth_fraction or 0.0, r.achieved_flops_fraction or 0.0) for r in a.ops
    )
    assert 0.85 < worst <= 1.0
    assert a.ops_costed_fraction >= 0.98


def test_an_inductor_kernels_bytes_against_a_hand_count():
    folder = FIXTURES / COMPILED
    a = analyze([timeline_in(folder)], Ceilings.load(folder / "ceilings.json"))
    row = next(r for r in a.ops if r.name == "triton_poi_fused__to_copy_add_19")
    # the fp32 master gradient of the 50304 x 768 tied embedding read and written (4 + 4
    # bytes) and its bf16 gradient read (2): 10 bytes an element, 12 calls in 3 steps
    assert row.calls == 12
    assert row.bytes == 12 * 50304 * 768 * 10
    assert row.memory_roof == "dram"
    assert row.achieved_bandwidth_fraction == pytest.approx(0.9886, abs=1e-4)
    codes = [f.code for f in a.findings]
    assert codes[0] == "fp32-storage"
    assert a.findings[0].time_lost_ms_per_step == pytest.approx(4.84, abs=0.01)


def test_the_fixes_as_measured_and_predicted():
    rows, _, _ = truth.own(T5)
    assert set(rows) == {"tf32"}
    truth.check_row(rows["tf32"], 10.26, 10.93, True, by="tf32")
    rows, _, _ = truth.own(VIT)
    assert set(rows) == {"pin-mem"}
    truth.check_row(rows["pin-mem"], 16.60, 15.71, True, by="pin_memory")


def test_the_t5s_report():
    _, report, t = truth.own(T5)
    assert t["baselines_differ_pct"] == pytest.approx(3.65, abs=0.01)
    codes = [f["code"] for f in report["findings"]]
    assert codes[:3] == ["launch-bound", "fp32-matmul", "unfused-chain"]
    remedies = [r["remedy"] for r in report["remedies"]]
    assert remedies[:3] == ["compile", "cuda_graphs", "tf32"]
    # the profiler cost this host-heavy loop 12.7% (issue 15 wants it under 10%)
    assert report["profiler_overhead_fraction"] == pytest.approx(0.127, abs=0.001)


def test_the_vits_report():
    _, report, t = truth.own(VIT)
    assert [f["code"] for f in report["findings"]][:2] == ["pageable-copy", "host-sync"]
    assert report["remedies"][0]["remedy"] == "prefetch"
    assert abs(report["profiler_overhead_fraction"]) < 0.01
    assert t["baselines_differ_pct"] == pytest.approx(17.36, abs=0.01)
