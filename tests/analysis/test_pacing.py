"""`analysis.pacing`: what a fix of the step's own work saves behind a worker-bound loader."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from membound.analysis.pacing import behind_loader, loader_wait_ms


def _f(code, lost, **ev):
    return SimpleNamespace(
        code=code, time_lost_ms_per_step=lost, share_of_step=lost / 10.0, evidence=ev,
        expected_step_ms_after_fix=10.0 - lost,
    )  # fmt: skip


def test_findings_behind_a_worker_bound_loader_are_cut_by_its_wait():
    fs = [
        _f("input-starved", 3.0, worker_bound=True, multiprocess_workers=True),
        _f("launch-bound", 5.0),
        _f("host-sync", 1.0),
        _f("pageable-copy", 0.5),
    ]
    kept, note = behind_loader(fs, 10.0)
    assert [f.code for f in kept] == ["input-starved", "launch-bound", "pageable-copy"]
    lb = kept[1]
    assert lb.time_lost_ms_per_step == pytest.approx(2.0)
    assert lb.share_of_step == pytest.approx(0.2)
    assert lb.expected_step_ms_after_fix == pytest.approx(8.0)
    assert lb.evidence["unpaced_ms_per_step"] == 5.0
    assert kept[0].time_lost_ms_per_step == 3.0 and kept[2].time_lost_ms_per_step == 0.5
    assert "waits 3.00 ms" in note and "host-sync 1.00" in note


def test_no_pace_without_a_worker_bound_loader():
    handing_over = [_f("input-starved", 1.5, worker_bound=False), _f("launch-bound", 1.0)]
    assert loader_wait_ms(handing_over) is None
    kept, note = behind_loader(handing_over, 10.0)
    assert note is None and kept[1].time_lost_ms_per_step == 1.0
    assert behind_loader([_f("launch-bound", 1.0)], None) == ([_f("launch-bound", 1.0)], None)
