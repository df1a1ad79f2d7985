"""`input-starved` against the planted input pipeline (hand-computed numbers)."""

from __future__ import annotations

import pytest

from support.analysis import by_code, run


def test_input_starved_in_the_input_pipeline(ceilings):
    a = run("synthetic_input_pipeline", ceilings)
    assert [f.code for f in a.findings] == ["input-starved", "pageable-copy", "host-sync"]
    f = by_code(a)["input-starved"]
    assert f.time_lost_ms_per_step == pytest.approx(1.0)
    assert f.share_of_step == pytest.approx(0.2)
    assert f.spans == [(0.0, 1000.0), (5000.0, 6000.0)]
