"""benchmarks/compile_bytes.py: what torch.compile did to a loop's GPU work, from an eager and
a compiled trace of it."""

from __future__ import annotations

import pytest

from support.paths import FIXTURES, benchmark


def _pair(eager, compiled):
    mod = benchmark("compile_bytes")
    return [mod.split(mod._trace(str(FIXTURES / name))) for name in (eager, compiled)]


def test_the_ddpms_compile_cut_a_sixth_of_the_bytes_and_ran_nearer_its_roof():
    eager, compiled = _pair("h100_real_ddpm_unet_truth6", "h100_compiled_ddpm_unet")
    # inductor calls cuDNN's convolutions as they were
    assert compiled["extern"]["gb"] == pytest.approx(eager["extern"]["gb"], rel=1e-3)
    assert compiled["extern"]["ms"] == pytest.approx(eager["extern"]["ms"], rel=0.02)
    assert (eager["memory"]["ms"], compiled["memory"]["ms"]) == (
        pytest.approx(24.86, abs=0.01),
        pytest.approx(13.82, abs=0.01),
    )
    assert 1 - compiled["memory"]["gb"] / eager["memory"]["gb"] == pytest.approx(0.16, abs=0.01)
    assert eager["reach"] == pytest.approx(0.51, abs=0.01)
    assert compiled["reach"] == pytest.approx(0.75, abs=0.01)


def test_gpt2s_compile_cut_bytes_not_the_distance_to_the_roof():
    eager, compiled = _pair("h200_real_gpt2", "h200_real_gpt2_compiled")
    assert 1 - compiled["memory"]["gb"] / eager["memory"]["gb"] == pytest.approx(0.43, abs=0.01)
    assert abs(compiled["reach"] - eager["reach"]) < 0.05


def test_the_command_prints_both_columns(capsys, monkeypatch):
    import sys

    mod = benchmark("compile_bytes")
    argv = ["compile_bytes.py", str(FIXTURES / "h100_real_ddpm_unet_truth6"),
            str(FIXTURES / "h100_compiled_ddpm_unet")]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    assert mod.main() == 0
    out = capsys.readouterr().out
    assert "11.04 ms/step less, 16% of its bytes gone" in out
