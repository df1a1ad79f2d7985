"""benchmarks/point_launches.py: which figures depend on launch calls' durations."""

from __future__ import annotations

import pytest

from support.paths import FIXTURES, benchmark


def test_with_instant_launches_only_the_launch_idle_moves():
    """The ViT (H200, 2026-12-04): with every launch call an instant at its end, the replay's
    what-if, the syncs and pageable copies stay; the launch idle falls from 4.02 to 1.09
    ms/step and goes to `other` (the spans the timeline bridges are the calls)."""
    recorded, point = benchmark("point_launches").compare(FIXTURES / "h200_real_vit_timm_oos1")
    assert point["whatif_end_ms"] == pytest.approx(recorded["whatif_end_ms"], abs=0.01)
    for cause in ("sync", "pageable_copy", "dataloader", "profiler"):
        assert point["idle_ms"][cause] == recorded["idle_ms"][cause]
    assert recorded["idle_ms"]["launch"] == pytest.approx(4.02, abs=0.01)
    assert point["idle_ms"]["launch"] == pytest.approx(1.09, abs=0.01)
    moved = recorded["idle_ms"]["launch"] - point["idle_ms"]["launch"]
    assert point["idle_ms"]["other"] == pytest.approx(
        recorded["idle_ms"]["other"] + moved, abs=0.02
    )
