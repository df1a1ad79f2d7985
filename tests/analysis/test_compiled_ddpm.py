"""What torch.compile did to the DDPM U-Net, read from the compiled loop's own trace
(`h100_compiled_ddpm_unet`, H100, 2026-12-07) beside the eager one of the call before
(`h100_real_ddpm_unet_truth6`, another H100 host). compile saved 9.85 ms/step there, and
10.57 on a first host, where membound predicts 15.59 from the eager trace: its memory-bound
ops brought to their roof (11.3 ms/step) and the chains' intermediates gone (4.3).

The compiled trace says where that is wrong:
- the convolutions are as they were (inductor calls cuDNN; the U-Net stays NCHW), so the
  change is all in the memory-bound ops: 24.9 ms/step of kernels became 13.8;
- inductor's kernels run near their roof (about 0.8 of it, time-weighted), not at it;
- they move 35.7 GB a step where the eager ops moved 42.6: the fusion removed a sixth of the
  bytes, where the chains' finding counted about a third (a training step writes what its
  backward reads).
A fix of the compile prediction has to hold for both this and the GPT-2 loops, where the
same prediction is within (`memory_gap`'s docstring); this file keeps the facts it must fit.
Since the twenty-fourth session the chains through a GroupNorm (all of the model's) are not
counted: a fused GroupNorm reads its input twice (`rules.memory.STATS_NORMS`), and compile is
predicted at 11.86, within (`test_compiled_resnet50.py`: BatchNorm's the same way)."""

from __future__ import annotations

import functools

import pytest

from membound.trace.capture_meta import timeline_in
from support import truth
from support.paths import FIXTURES, benchmark

EAGER, COMPILED = "h100_real_ddpm_unet_truth6", "h100_compiled_ddpm_unet"
_report = functools.cache(truth.report)

CONV = ("aten::convolution_backward", "aten::cudnn_convolution")


def _per_step(name, keep):
    """(device ms a step, the rows) of fixture `name`'s report ops that `keep` takes."""
    r = _report(name)
    rows = [o for o in r["ops"] if keep(o)]
    return sum(o["device_ms"] for o in rows) / r["steps"]["count"], rows


def _memory(name):
    """The memory-bound rest a step (`benchmarks/compile_bytes.py`: not a library kernel
    inductor calls, not the optimizer): {"ms", "gb", ...}."""
    mod = benchmark("compile_bytes")
    return mod.split(timeline_in(FIXTURES / name))["memory"]


def test_the_convolutions_are_unchanged():
    eager, _ = _per_step(EAGER, lambda o: o["name"] in CONV)
    compiled, _ = _per_step(COMPILED, lambda o: o["name"] in CONV)
    assert eager == pytest.approx(30.92, abs=0.01)
    assert compiled == pytest.approx(eager, rel=0.02)


def test_the_memory_bound_ops_fell_by_less_than_predicted():
    eager, compiled = _memory(EAGER), _memory(COMPILED)
    assert eager["ms"] == pytest.approx(24.86, abs=0.01)
    assert compiled["ms"] == pytest.approx(13.82, abs=0.01)
    assert eager["gb"] == pytest.approx(42.59, abs=0.01)
    assert compiled["gb"] == pytest.approx(35.67, abs=0.01)
    # what the eager report predicts compile removes of them: far more than went
    report = _report(EAGER)
    compile_fix = next(r for r in report["remedies"] if r["remedy"] == "compile")
    assert compile_fix["saving_ms_per_step"] == pytest.approx(11.86, abs=0.01)
    assert abs(eager["ms"] - compiled["ms"] - compile_fix["saving_ms_per_step"]) < 1.0
    # inductor's own kernels: near their roof, not at it
    _, generated = _per_step(
        COMPILED,
        lambda o: (
            o["bound"] == "memory"
            and o["name"].startswith("triton_")
            and o["fraction_of_attainable"]
        ),
    )
    time = sum(o["device_ms"] for o in generated)
    reach = sum(o["device_ms"] * o["fraction_of_attainable"] for o in generated) / time
    assert 0.75 < reach < 0.85


def test_the_compiled_trace_is_costed():
    """Issue 16: inductor's kernels get their bytes from their arguments."""
    assert _report(COMPILED)["ops_costed_fraction"] >= 0.98
