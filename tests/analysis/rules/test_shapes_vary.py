"""No CUDA graph where the step's shapes change from step to step (`rules.host_bound.shapes_vary`):
a graph replays one fixed sequence of kernels at fixed shapes."""

from __future__ import annotations

from support.analysis import by_code
from support.tracebuilder import TraceBuilder


def _loop(path, dims_of_step, steps: int = 3, tail: bool = False):
    """`steps` steps of 1000 µs, each 20 ops of 40 µs (from 10 µs in), every one launching a
    5-µs kernel from inside it: the GPU idles while the host issues the next (launch-bound).
    Each op records input dims `dims_of_step(step)` and a concrete input that changes every
    call (a row index). `tail`: the ops pass's last window, cut short, holds one op."""
    b = TraceBuilder()
    for s in range(steps):
        t = s * 1000.0
        b.step(s, t, 1000)
        for i in range(20):
            at = t + 10 + i * 45
            b.op("aten::mul", at, 40, dims=[dims_of_step(s), []], types=["float", "Scalar"],
                 concrete=["", str(s * 100 + i)])  # fmt: skip
            b.launch("mul_kernel", at + 5, at + 20, 5)
    if tail:
        t = steps * 1000.0
        b.step(steps, t, 100)
        b.op("aten::item", t + 10, 20, dims=[[]])
    return b.write(path)


def _analyze(path):
    from membound.analysis import analyze

    return analyze([path], None)


def test_fixed_shapes_keep_the_graph_remedies(tmp_path):
    from membound.analysis.remedies import remedies_of

    a = _analyze(_loop(tmp_path / "fixed.json", lambda s: [64, 128], tail=True))
    f = by_code(a)["launch-bound"]
    assert f.evidence["shapes_vary"] is False
    assert "cuda_graphs" in remedies_of(f.code, f.evidence)
    assert "CUDA graph" in f.fix


def test_shapes_that_change_every_step_leave_compile_alone(tmp_path):
    from membound.analysis.remedies import remedies_of

    a = _analyze(_loop(tmp_path / "vary.json", lambda s: [64, 128 + 32 * s]))
    f = by_code(a)["launch-bound"]
    assert f.evidence["shapes_vary"] is True
    assert remedies_of(f.code, f.evidence) == ("compile",)
    assert "no CUDA graph can replay it" in f.fix and "dynamic=True" in f.fix
    assert "cuda_graphs" not in {r.key for r in a.remedies}


def test_host_bound_says_why_no_graph(tmp_path):
    """host-bound's only remedy is the whole-step graph: where the shapes change it has none,
    and its fix says why."""
    from membound.analysis.remedies import remedies_of

    ev = {"shapes_vary": True, "mid_step_syncs_per_step": 0.0, "backward_syncs_per_step": 0.0}
    assert remedies_of("host-bound", ev) == ()
    assert remedies_of("host-bound", {**ev, "shapes_vary": False}) == ("graph_step",)


def test_recorded_loops_with_fixed_shapes_are_not_flagged():
    """Three recorded truth fixtures that a looser comparison flagged: the tabular MLP's
    loader calls select with a new row index each time (concrete inputs), the graphed GPT-2's
    ops pass ends in a window cut short (one read), and the CIFAR ResNet-18 as a plain case."""
    from membound.analysis.rules.host_bound import _shapes_vary
    from membound.trace.load import load_trace
    from support.paths import FIXTURES

    for name in (
        "h200_real_tabular_mlp_oos1",
        "h200_real_gpt2_reduce_overhead",
        "h100_real_cifar_resnet18_oos1",
    ):
        ops = next(p for p in (FIXTURES / name).iterdir() if p.name.startswith("trace.ops"))
        assert _shapes_vary(load_trace(ops)) is False, name
