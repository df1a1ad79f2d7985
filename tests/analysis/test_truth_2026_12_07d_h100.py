"""The twenty-third session's second H100 call (2026-12-07; the datasheet ceilings):
`SESSION_S=470 bash benchmarks/gpu/session_dec16d.sh`, on an H100 `session_dec16c.sh`.

bf16 autocast's host work per kernel was a constant (`gpu_whatif.AUTOCAST_LAUNCHES_PER_KERNEL`,
0.4 plain launches a kernel); `membound diagnose` now measures it after the script
(`trace.profiler_cost.autocast_cost`). On this host the probe read 1.28, 1.72 and, in the
diagnose, 1.16 launches a kernel: autocast's host work is three times the constant here.

`h100_real_t5_seq2seq_truth6`: the HF T5 on that host (GPU busy 58%, the host at 80 of 91
ms/step). bf16 saved -0.85 ms/step; with the measured factor autocast's 23.03 ms/step of host
work eats the whole GPU saving (10.68 at most), so 0.00 is predicted: within. With the constant
it would have been 2.72: outside the tolerance. Its TF32 run failed: the script's truth line
read the legacy TF32 flag, which torch 2.11 refuses once HF set it through the per-backend API
(mended in examples/real/_common.py, `tf32_flag`).

The measured savings are the device's; the predictions are today's code's."""

from __future__ import annotations

import functools

import pytest

from membound.analysis import gpu_whatif
from support import truth

NAME = "h100_real_t5_seq2seq_truth6"
_report = functools.cache(truth.report)


def test_bf16_within_on_the_measured_autocast_cost():
    rows, _, _ = truth.own(NAME)
    truth.check_row(rows["bf16"], -0.85, 0.0, True)
    assert "tf32" not in rows  # the run failed: no measurement, no row


def test_the_measured_factor_prices_autocast_where_the_constant_would_not_have():
    curve = _report(NAME)["gpu_whatif"]
    assert curve["autocast_launches_per_kernel_measured"] == pytest.approx(1.1568)
    assert curve["autocast_host_ms"] == pytest.approx(23.03, abs=0.01)
    assert curve["saving_ms"][-1] == pytest.approx(10.68, abs=0.01)
    assert gpu_whatif.autocast_cap(curve) == 0.0
    # the constant: 0.4 x 1832 kernels x 10.866 us = 7.96 ms, leaving 2.72 of the 10.68
    constant = gpu_whatif.autocast_host_ms(curve["kernels_per_step"], 10.866)
    assert constant == pytest.approx(7.96, abs=0.01)
    old = gpu_whatif.autocast_cap({**curve, "autocast_host_ms": constant})
    assert old == pytest.approx(2.72, abs=0.01)
    assert abs(old - -0.85) > truth.tolerance(-0.85)


def test_the_note_says_it_was_measured():
    note = next(n for n in _report(NAME)["notes"] if n.startswith("GPU what-if"))
    assert "1.16 launches' host time a kernel as measured here" in note
