"""The "l2-reads" memory roof (issue 16): a call too big for L2 whose every read argument fits
in L2 on its own may find its inputs there; its reads up to L2's size are held to L2's rate,
the rest of its bytes to HBM's. Checked on the compiled DCGAN the H100 recorded on
2026-12-05 with the ceilings of the same call (`h100_samecall_*`), where three inductor
kernels had run at 105-113% of the HBM roof."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from membound.analysis import analyze
from membound.analysis.roofline import call_memory_roof, call_rates, memory_roof
from membound.cost.registry import Cost
from membound.device.ceilings import Ceilings
from membound.report.json_report import to_dict
from membound.trace.capture_meta import timeline_in
from support.paths import FIXTURES

# a toy device: HBM copy 1 TB/s, L2 4 TB/s over 50 MB
TOY = Ceilings(
    device="cuda", name="toy", memory_bandwidth=1e12, flops={"bf16": 1e14},
    l2_bandwidth=4e12, l2_bytes=50_000_000,
)  # fmt: skip
SAME_CALL = FIXTURES / "h100_samecall_ceilings.json"
COMPILED = FIXTURES / "h100_samecall_dcgan_compiled"
EAGER = FIXTURES / "h100_samecall_dcgan"


def test_reads_that_fit_in_l2_are_held_to_l2s_rate_up_to_its_size():
    # 90 MB a call, 60 of them read as three 20 MB tensors: 50 MB from L2 (12.5 µs), the
    # other 40 MB (10 read, 30 written) from HBM (40 µs)
    name, rate = call_memory_roof(TOY, 9e7, None, 60 / 90, largest_read=2e7)
    assert name == "l2-reads"
    assert rate == pytest.approx(9e7 / (5e7 / 4e12 + 4e7 / 1e12))
    # one read bigger than L2: streamed, its head gone from L2; HBM's roof
    assert call_memory_roof(TOY, 9e7, None, 60 / 90, largest_read=6e7) == ("dram", 1e12)
    # the largest read or the split unknown: HBM's, as before
    assert call_memory_roof(TOY, 9e7, None, 60 / 90) == ("dram", 1e12)
    assert call_memory_roof(TOY, 9e7, None, None, largest_read=2e7) == ("dram", 1e12)
    # fills read nothing worth L2; a call that fits whole keeps L2's own roof
    assert call_memory_roof(TOY, 9e7, "fill", 0.0, largest_read=0.0)[0] == "dram"
    assert call_memory_roof(TOY, 4e7, None, 0.5, largest_read=2e7) == ("l2", 4e12)
    # no L2 figures: nothing changes
    hbm = dataclasses.replace(TOY, l2_bandwidth=None, l2_bytes=None)
    assert call_memory_roof(hbm, 9e7, None, 60 / 90, largest_read=2e7) == ("dram", 1e12)


def test_call_rates_and_memory_roof_take_each_calls_fit():
    nbytes = np.array([9e7, 9e7, 9e7])
    reads = np.array([6e7, 6e7, 6e7])
    largest = np.array([2e7, 6e7, math.nan])  # fits, too big, unknown
    names, rates = call_rates(TOY, nbytes, reads, None, largest)
    assert names == {"l2-reads", "dram"}
    assert rates[0] == pytest.approx(9e7 / (5e7 / 4e12 + 4e7 / 1e12))
    assert rates[1:].tolist() == [1e12, 1e12]
    # without the largest reads: every call HBM's
    assert call_rates(TOY, nbytes, reads, None)[1].tolist() == [1e12] * 3
    name, bw = memory_roof(TOY, nbytes, None, reads, largest)
    assert name == "mixed"
    assert bw == pytest.approx(2.7e8 / (9e7 / rates[0] + 2 * 9e7 / 1e12))


def test_a_sum_of_costs_keeps_the_largest_read_only_where_both_know_it():
    a = Cost(0.0, 3e7, None, read_bytes=2e7, largest_read=1e7)
    b = Cost(0.0, 6e7, None, read_bytes=4e7, largest_read=3e7)
    assert (a + b).largest_read == 3e7
    assert (a + Cost(0.0, 1e6, None)).largest_read is None


def _ops(trace_dir):
    return {r.name: r for r in analyze(trace_dir / "trace.json.gz", Ceilings.load(SAME_CALL)).ops}


def test_the_compiled_dcgan_runs_no_op_above_the_same_calls_roofs():
    """Recorded on an H100 after `membound roofline --refresh` in the same device call. Before
    this roof, three inductor kernels of the backward ran above the HBM roof: the BatchNorm
    backward reduction reading three 33.5 MB fp32 tensors (100.7 MB a call, L2 50 MiB) at
    112.75%, two pointwise kernels at 104.73% and 105.75%
    (benchmarks/results/over_roof_h100_samecall_2026-12-05.txt)."""
    ops = _ops(COMPILED)
    assert ops, "no op placed"
    above = {n: r.achieved_bandwidth_fraction for n, r in ops.items()
             if (r.achieved_bandwidth_fraction or 0) > 1.0 or (r.achieved_flops_fraction or 0) > 1.0}  # fmt: skip
    assert above == {}
    red = ops["triton_red_fused_native_batch_norm_backward_threshold_backward_1"]
    assert red.memory_roof == "l2-reads"
    assert 0.8 < red.achieved_bandwidth_fraction < 0.9
    # held to HBM's read rate as before, it is above that roof: what the new roof explains
    c = Ceilings.load(SAME_CALL)
    per_call = red.bytes / red.calls
    hbm = call_memory_roof(c, per_call, "inductor", 1.0)
    assert hbm[0] == "dram"
    assert per_call / (red.device_ms / red.calls / 1e3) / hbm[1] == pytest.approx(1.1275, abs=0.003)
    # the eager run of the same call: its ATen ops know no largest read, and none is above
    eager = _ops(EAGER)
    assert not any((r.achieved_bandwidth_fraction or 0) > 1.0 for r in eager.values())
    assert not any(r.memory_roof == "l2-reads" for r in eager.values())


def test_compile_leaves_the_dcgans_kernel_count_and_step_as_they_were():
    """Issue 15's DCGAN: torch.compile was its top remedy (3.8-4.2 ms/step predicted) and lost
    0.7-2.2 ms/step in four timed runs. In one H100 call the compiled run launched no fewer
    kernels a step than the eager one (convolutions stay cuDNN's; BatchNorm + LeakyReLU become
    a reduction and a pointwise kernel, as many as before), and its unprofiled step was the
    same. The training thread's CPU a step is the median step's (`cpu_ms_median`): the
    compiled run's unprofiled phase averaged 1141.9 ms (a recompiling step)."""
    reports = {}
    for d in (EAGER, COMPILED):
        meta = json.loads((d / "capture.json").read_text())
        doc = to_dict(analyze(d / "trace.json.gz", Ceilings.load(SAME_CALL)))
        reports[d.name] = (meta, doc)
    (_, ed), (cm, cd) = reports[EAGER.name], reports[COMPILED.name]
    kernels = [[s["kernels"] for s in doc["steps"]["per_step"]] for doc in (ed, cd)]
    assert kernels == [[325] * 5, [334] * 5]
    assert ed["steps"]["unprofiled_median_ms"] == pytest.approx(15.23, abs=0.01)
    assert cd["steps"]["unprofiled_median_ms"] == pytest.approx(15.16, abs=0.01)
    assert cm["thread_per_step"]["unprofiled"]["cpu_ms"] == pytest.approx(1141.93, abs=0.01)
    assert cd["steps"]["thread_cpu_ms"]["unprofiled"] == pytest.approx(8.3958, abs=1e-4)
    assert ed["steps"]["thread_cpu_ms"]["unprofiled"] == pytest.approx(10.44, abs=0.01)


def test_aten_pointwise_ops_name_their_largest_read():
    """An ATen pointwise op's largest tensor input is its `largest_read` (a broadcast bias at
    its own size), so the "l2-reads" roof reaches eager ops too."""
    from membound.cost import cost_of

    big = cost_of("aten::add_", [[64, 197, 768], [64, 197, 768], []], ["float", "float", "Scalar"])
    assert big.largest_read == 64 * 197 * 768 * 4
    bias = cost_of("aten::add", [[64, 197, 768], [768]], ["c10::BFloat16", "c10::BFloat16"])
    assert bias.largest_read == 64 * 197 * 768 * 2


def test_the_vits_residual_gradient_add_is_under_its_roof_on_the_days_ceilings():
    """timm's ViT-B/16 on an H100 (2026-12-06, fourteenth session), on the ceilings measured on
    an H100 that day (`h100_measured_ceilings_2026-12-06.json`: `membound roofline --refresh`,
    twelfth session): the backward's fp32 `add_` of two 38.7 MB tensors ran at 105.5% of the
    HBM roof for its read/write mix; each read fits in L2 (50 MiB), so those calls' roof is
    "l2-reads" (the row's is "mixed": its scalar step counters' calls keep HBM's), and it sits
    below 100%, as every op of that trace does."""
    ceilings = Ceilings.load(FIXTURES / "h100_measured_ceilings_2026-12-06.json")
    a = analyze([timeline_in(FIXTURES / "h100_real_vit_timm_truth3")], ceilings)
    add = next(r for r in a.ops if r.name == "aten::add_")
    assert add.memory_roof == "mixed"
    assert 0.8 < add.achieved_bandwidth_fraction <= 1.0  # 83.8%
    before = dataclasses.replace(ceilings, l2_bandwidth=None)  # no L2 roof: 105.5%
    b = analyze([timeline_in(FIXTURES / "h100_real_vit_timm_truth3")], before)
    assert next(r for r in b.ops if r.name == "aten::add_").achieved_bandwidth_fraction > 1.05
    assert max(r.achieved_bandwidth_fraction or 0.0 for r in a.ops) <= 1.0
