"""`pageable-copy` on a loader with workers: the GPU idle beside the batch's copies that
pinning moves off the training thread (the shared-memory batch dropped there), at most the
release cost `trace.loader_probe` measured (issue 15: Lightning and the timm ViT saved more by
pinning than the copies alone predicted)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from membound.analysis import analyze
from membound.trace.capture_meta import timeline_in
from membound.trace.loader_probe import META_KEY

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _with_measurement(tmp_path, fixture: str, moved: float | None) -> Path:
    """A copy of a recorded capture whose meta holds a release cost of `moved` ms."""
    dst = tmp_path / fixture
    shutil.copytree(FIXTURES / fixture, dst)
    if moved is not None:
        meta = json.loads((dst / "capture.json").read_text())
        meta[META_KEY] = {"release_moved_ms": moved, "pageable": {}, "pinned": {}}
        (dst / "capture.json").write_text(json.dumps(meta))
    return timeline_in(dst)


def _pageable(trace, ceilings):
    a = analyze(trace, ceilings)
    return next(f for f in a.findings if f.code == "pageable-copy"), a


@pytest.fixture(scope="module")
def ceilings():
    from membound.device.ceilings import Ceilings

    return Ceilings.load(FIXTURES / "h200_ceilings.json")


def test_lightning_gap_after_the_copy_counts_up_to_the_measured_cost(tmp_path, ceilings):
    """Lightning (run 5): after the 7 ms pageable copy the training thread is silent ~6.4 ms
    before its next launch, the GPU idle ("other"); with a measured release cost above that,
    the whole beside-idle counts; with a smaller one, the cost caps it."""
    base, a0 = _pageable(
        _with_measurement(tmp_path / "a", "h200_real_lightning_fit_run5", None), ceilings
    )
    assert "moved_off_thread_ms_per_step" not in base.evidence
    big, _ = _pageable(
        _with_measurement(tmp_path / "b", "h200_real_lightning_fit_run5", 6.04), ceilings
    )
    ev = big.evidence
    assert ev["worker_batches_per_step"] == 1.0
    assert ev["gpu_idle_beside_copies_ms_per_step"] == pytest.approx(5.53, abs=0.01)
    assert ev["moved_off_thread_ms_per_step"] == ev["gpu_idle_beside_copies_ms_per_step"]
    assert big.time_lost_ms_per_step == pytest.approx(
        base.time_lost_ms_per_step + ev["moved_off_thread_ms_per_step"], rel=1e-6
    )
    small, a = _pageable(
        _with_measurement(tmp_path / "c", "h200_real_lightning_fit_run5", 2.0), ceilings
    )
    assert small.evidence["moved_off_thread_ms_per_step"] == 2.0

    def pin(analysis):
        return next(r for r in analysis.remedies if r.key == "pin_memory").saving_ms_per_step

    assert pin(a) - pin(a0) == pytest.approx(2.0, rel=1e-6)  # the pinning remedy carries it


def test_vit_gap_before_the_copy_counts(tmp_path, ceilings):
    """The ViT's loop keeps the last batch until enumerate's next tuple: the thread drops it
    between `__next__` and the copy, where the timeline calls the GPU's wait `sync` (the
    loss.item() before it)."""
    f, _ = _pageable(_with_measurement(tmp_path, "h200_real_vit_timm_oos1", 6.04), ceilings)
    assert f.evidence["gpu_idle_beside_copies_ms_per_step"] == pytest.approx(6.67, abs=0.01)


def test_no_workers_no_change(tmp_path, ceilings):
    """The prefetch ResNet-50's copies follow launches with no silent gap: nothing beside them
    moves (0.18 ms), so its prediction, which measured right, stays."""
    f, _ = _pageable(_with_measurement(tmp_path, "h200_real_resnet50_prefetch", 6.04), ceilings)
    assert f.evidence["moved_off_thread_ms_per_step"] < 0.25
