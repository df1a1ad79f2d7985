"""CUDA-graph replays costed from their captures (issue 16, `trace.graph_ops`): the kernels a
replay runs get the ops that launched them while the graph was captured."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from membound.analysis import analyze
from membound.device.ceilings import Ceilings
from membound.trace.capture_meta import timeline_in
from membound.trace.graph_ops import SYNTHETIC_TID, attach, captured
from membound.trace.load import load_trace
from membound.trace.model import GRAPH_LAUNCH
from support.tracebuilder import TraceBuilder

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.fixture(scope="module")
def h200():
    """The ceilings measured on the H200 the fixtures' tests use (tests/fixtures/README.md)."""
    return Ceilings.load(FIXTURES / "h200_ceilings.json")


def _capture(tmp_path, names=("aten::tanh", "triton_poi_fused_add_0"), ran=1) -> Path:
    """A capture: `ran` launches that ran (before the capture began), then one launch per
    name inside its op (with shapes), none of which runs."""
    b = TraceBuilder()
    for i in range(ran):
        b.op("aten::fill_", 1 + 10 * i, 8, dims=[[4]], types=["float"])
        b.launch("fill_kernel", 2 + 10 * i, 2 + 10 * i, 1.0)
    t = 100.0
    for name in names:
        b.op(name, t, 8, dims=[[64, 64], [64, 64]], types=["float", "float"])
        b.runtime("cuLaunchKernel" if name.startswith("triton_") else "cudaLaunchKernel", t + 2, 3)
        t += 10
    return b.write(tmp_path / "capture.json")


def _replays(tmp_path, kernel_names=("tanh_kernel", "triton_poi_fused_add_0"), n=2) -> Path:
    b = TraceBuilder()
    for s in range(n):
        o = 1000.0 * s
        b.step(s, o, 1000)
        b.op("CUDAGraph.replay", o + 1, 30)
        corr = b.runtime("cudaGraphLaunch", o + 2, 20)
        for k, name in enumerate(kernel_names):
            b.kernel(name, o + 50 + 10 * k, 5, corr)
    return b.write(tmp_path / "ops.json")


def test_captured_launches_are_those_that_did_not_run(tmp_path):
    g = captured(load_trace(_capture(tmp_path, ran=2)))
    assert g is not None and g.size == 2  # the two fills ran: not the graph's
    assert g.triton_names == [None, "triton_poi_fused_add_0"]
    assert captured(load_trace(_capture(tmp_path, names=(), ran=1))) is None


def test_each_replayed_kernel_gets_its_captured_op(tmp_path):
    ops, cap = load_trace(_replays(tmp_path)), load_trace(_capture(tmp_path))
    new, stats = attach(ops, [cap])
    assert (stats.replays, stats.matched, stats.kernels) == (2, 2, 4)
    assert "2 of 2 CUDA-graph replays costed" in stats.note()
    # every replayed kernel now points at a launch of its own, on a replay's own thread
    launch = {int(c): i for i, c in enumerate(new.runtime.correlation)}
    rows = [launch[int(c)] for c in new.gpu.correlation]
    assert len(set(rows)) == 4 and not (new.runtime.call[rows] == GRAPH_LAUNCH).any()
    assert set(new.runtime.tid[rows].tolist()) == {SYNTHETIC_TID, SYNTHETIC_TID + 1}
    # the copied ops sit at the replay's launch, in the capture's order and shapes
    copied = np.flatnonzero(new.cpu.tid >= SYNTHETIC_TID)
    assert [new.names[i] for i in new.cpu.name[copied]] == ["aten::tanh",
                                                           "triton_poi_fused_add_0"] * 2  # fmt: skip
    assert new.cpu.ts[copied][0] == pytest.approx(2.0 - 2.0)  # first launch at the replay's
    assert all(new.shapes[s][0] == [[64, 64], [64, 64]] for s in new.cpu.shape[copied])
    # the input trace is left as it was
    assert (ops.runtime.call == GRAPH_LAUNCH).sum() == 2 and len(ops.cpu) < len(new.cpu)


@pytest.mark.parametrize(
    "kernels",
    [("tanh_kernel",), ("tanh_kernel", "triton_poi_fused_mul_1")],
    ids=["fewer kernels", "another triton kernel"],
)
def test_a_replay_no_capture_matches_stays_uncosted(tmp_path, kernels):
    ops, cap = load_trace(_replays(tmp_path, kernels)), load_trace(_capture(tmp_path))
    new, stats = attach(ops, [cap])
    assert new is ops and (stats.replays, stats.matched) == (2, 0)
    assert "stay uncosted" in stats.note()


def test_graphed_planted_loop_is_costed_and_not_launch_bound(h200):
    """examples/planted/launch_bound_graphed.py under `membound diagnose` on the H200
    (2026-12-03, benchmarks/gpu/session_dec03d.sh): the capture recorded 293 launches, 2 of
    which ran outside the graph, and each of the ops pass's 3 replays ran 291 kernels. Costed
    from the capture, the GPU time is 99.7% costed (the same loop recorded without its
    capture: 0.35%, tests/analysis/test_cuda_graphs.py), tanh's bytes are the hand count, and
    the loop that is launch-bound eager (h200_launch_bound: 5.91 ms/step) is not."""
    a = analyze([timeline_in(FIXTURES / "h200_launch_bound_graphed_run2")], h200)
    assert any("3 of 3 CUDA-graph replays costed" in n and "873 kernels" in n for n in a.notes)
    assert a.ops_costed_fraction == pytest.approx(0.9971, abs=1e-4)
    assert not any("count as uncosted" in n for n in a.notes)
    rows = {r.name: r for r in a.ops}
    tanh = rows["aten::tanh"]  # 64 x 64 fp32: read once, written once
    assert tanh.bytes / tanh.calls == 2 * 64 * 64 * 4 and tanh.exact_cost
    # 24 layers: 24 tanh per step (op rows count over the timeline's 7 steps). The ops pass's
    # windows come from its own launches, not the copied ones (which had left 16 per step)
    assert tanh.calls == 24 * len(a.steps)
    assert rows["aten::tanh_backward"].bytes / rows["aten::tanh_backward"].calls == 3 * 64 * 64 * 4
    assert not any(f.code == "launch-bound" for f in a.findings)
    assert [f.code for f in a.findings] == ["host-sync"]  # its timer's per-step sync


def test_reduce_overhead_gpt2_is_costed_from_its_captures(h200):
    """examples/real/gpt2_compiled.py --mode reduce-overhead on the H200 (2026-12-03): 8
    captures recorded (graphs of 200 and 442 launches), 16 replays in the ops pass, all
    matched: 99.8% of the GPU time costed (6.8% without the captures: 69% of it ran in
    replays, and the eager ops outside them are few; 99.4% and 6.3% before the gradient
    clipping's foreach ops were costed from the parameters, 2026-12-04). Inductor's kernels
    keep their names and arguments: `_to_copy_add` reads a bf16 and an fp32 50304 x 768
    tensor and writes an fp32 one, 10 bytes an element. No launch-bound on graphed code."""
    a = analyze([timeline_in(FIXTURES / "h200_real_gpt2_reduce_overhead")], h200)
    assert any("16 of 16 CUDA-graph replays costed" in n for n in a.notes)
    assert a.ops_costed_fraction == pytest.approx(0.9979, abs=1e-4)
    rows = {r.name: r for r in a.ops}
    k = rows["triton_poi_fused__to_copy_add_19"]
    assert k.bytes / k.calls == 50304 * 768 * (2 + 4 + 4) and k.exact_cost
    mm = rows["aten::mm"]
    assert mm.exact_cost and mm.flops > 0 and mm.compute == "bf16"
    assert [f.code for f in a.findings] == ["fp32-storage", "host-sync"]
    assert not any(f.code == "launch-bound" for f in a.findings)


def test_without_its_capture_files_the_replays_count_as_uncosted(tmp_path, h200):
    """The same run with the capture traces gone: the meta still lists them, the analysis
    reads none and says the replays are uncosted."""
    src = FIXTURES / "h200_launch_bound_graphed_run2"
    for name in ("capture.json", "trace.json.gz", "trace.ops.json.xz"):
        (tmp_path / name).write_bytes((src / name).read_bytes())
    a = analyze([tmp_path / "trace.json.gz"], h200)
    assert a.ops_costed_fraction < 0.2
    assert any("CUDA-graph replays" in n and "uncosted" in n for n in a.notes)
    gpt2 = FIXTURES / "h200_real_gpt2_reduce_overhead"
    (tmp_path / "trace.json.gz").unlink()
    for name in ("capture.json", timeline_in(gpt2).name, "trace.ops.json.xz"):
        (tmp_path / name).write_bytes((gpt2 / name).read_bytes())
    b = analyze([timeline_in(tmp_path)], h200)
    assert b.ops_costed_fraction == pytest.approx(0.0677, abs=1e-4)


def test_fused_adamw_is_charged_for_the_updates_its_windows_hold(h200):
    """The ops pass of the reduce-overhead run has 3 step windows but the optimizer's kernels
    in only 2 (the last window ends before its update): 124.48 M fp32 parameters x 7 passes x
    4 bytes x 2 updates, not x 3 (which put fused AdamW at 120% of the HBM roof)."""
    a = analyze([timeline_in(FIXTURES / "h200_real_gpt2_reduce_overhead")], h200)
    adam = next(r for r in a.ops if r.name == "aten::_fused_adamw_")
    assert adam.bytes == pytest.approx(124.48e6 * 7 * 4 * 2, rel=1e-3)
    assert adam.achieved_bandwidth_fraction < 1.0
