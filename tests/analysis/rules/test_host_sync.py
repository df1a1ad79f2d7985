"""`host-sync` against the planted input pipeline (hand-computed numbers)."""

from __future__ import annotations

import pytest

from support.analysis import by_code, run


def test_host_sync_in_the_input_pipeline(ceilings):
    f = by_code(run("synthetic_input_pipeline", ceilings))["host-sync"]
    # sync: aten::item starts at 3020, the next kernel at 3500
    assert f.time_lost_ms_per_step == pytest.approx(0.48)
    assert f.evidence["syncs_per_step"] == {"cudaStreamSynchronize": 1, "aten::item": 1}
