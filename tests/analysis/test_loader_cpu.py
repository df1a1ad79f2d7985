"""analysis.loader_cpu: more workers save no more than the host's free cores allow."""

from __future__ import annotations

import json
import shutil

import pytest

from membound.analysis import analyze, loader_cpu
from membound.device.ceilings import Ceilings
from membound.trace.capture_meta import timeline_in
from support.paths import FIXTURES


def _meta(cores=16, kids_cpu=13.0, busy=1.0, working=1, proc_cpu=4.0, steps=(10.0, 10.0)):
    return {
        "host_cores": cores,
        "children_per_step": {
            "unprofiled": {
                "cpu_ms": kids_cpu,
                "processes": working,
                "working": working,
                "busy_cores": busy,
            }
        },
        "process_per_step": {"unprofiled": {"cpu_ms": proc_cpu}},
        "step_times_ms": {"unprofiled": list(steps)},
    }


def test_of_reads_the_phase_and_the_training_process_busy_cores():
    lc = loader_cpu.of(
        _meta(cores=16, kids_cpu=150.0, busy=15.0, working=16, proc_cpu=12.0), "unprofiled"
    )
    assert lc.main_busy == pytest.approx(1.2)
    assert lc.free == pytest.approx(16 - 1.2 - 15.0)
    assert lc.saturated
    assert lc.input_floor_ms == pytest.approx(150.0 / (16 - 1.2))
    ev = lc.evidence()
    assert ev["cores_saturated"] is True and ev["workers_working"] == 16


@pytest.mark.parametrize(
    "meta",
    [
        None,
        {},
        _meta(working=0),  # a compile's idle helpers: no worker worked
        {**_meta(), "host_cores": None},
        {**_meta(), "children_per_step": {}},  # recorded before 2026-12-07
        {**_meta(), "step_times_ms": {"unprofiled": []}},
    ],
)
def test_of_is_none_without_the_figures(meta):
    assert loader_cpu.of(meta, "unprofiled") is None


def test_of_reads_the_after_phase_where_the_timing_does():
    m = _meta()
    m["children_per_step"]["after"] = m["children_per_step"].pop("unprofiled")
    m["process_per_step"]["after"] = m["process_per_step"].pop("unprofiled")
    m["step_times_ms"]["after"] = m["step_times_ms"].pop("unprofiled")
    assert loader_cpu.of(m, "unprofiled") is None
    assert loader_cpu.of(m, "after") is not None


def test_workers_saving_stops_at_the_input_floor_and_the_gpus_part():
    free = loader_cpu.LoaderCpu(
        cores=16, workers_cpu_ms=40, workers_busy=4, workers_working=4, main_busy=1
    )
    # the floor (40 / 15 = 2.7 ms) is below the GPU's part (10 - 6 = 4): the whole wait
    assert loader_cpu.workers_saving(free, 10.0, 6.0) == pytest.approx(6.0)
    full = loader_cpu.LoaderCpu(
        cores=16, workers_cpu_ms=150, workers_busy=15, workers_working=16, main_busy=1
    )
    # the floor is 10 ms: the step is already there, nothing to save
    assert loader_cpu.workers_saving(full, 10.0, 6.0) == pytest.approx(0.0)
    some = loader_cpu.LoaderCpu(
        cores=16, workers_cpu_ms=120, workers_busy=12, workers_working=12, main_busy=1
    )
    assert loader_cpu.workers_saving(some, 10.0, 6.0) == pytest.approx(10.0 - 8.0)


def _mnist_with(tmp_path, **kw):
    """The H100 MNIST run (one worker turning PIL images into tensors, worker-bound: 4
    workers saved 6.33 of a 13.4 ms step) with the children's figures the capture now keeps
    written into its meta."""
    src = FIXTURES / "h100_real_mnist_cnn_oos1"
    folder = tmp_path / src.name
    shutil.copytree(src, folder)
    path = folder / "capture.json"
    meta = json.loads(path.read_text())
    steps = meta["step_times_ms"]["unprofiled"]
    mean = sum(steps) / len(steps)
    busy = kw.get("busy", 1.0)
    meta["host_cores"] = kw.get("cores", 16)
    meta["children_per_step"] = {
        "unprofiled": {"cpu_ms": busy * mean, "processes": 1, "working": 1, "busy_cores": busy}
    }
    path.write_text(json.dumps(meta))
    return analyze([timeline_in(folder)], Ceilings.load(folder / "ceilings.json"))


def test_with_cores_to_spare_more_workers_keep_the_whole_wait(tmp_path):
    a = _mnist_with(tmp_path, cores=16)
    f = next(f for f in a.findings if f.code == "input-starved")
    assert f.evidence["cores_saturated"] is False
    assert f.evidence["saving_by_remedy"]["workers"] == pytest.approx(f.time_lost_ms_per_step)
    workers = next(r for r in a.remedies if r.key == "workers")
    assert workers.saving_ms_per_step == pytest.approx(7.669, abs=1e-3)  # as before
    assert "Raise num_workers" in f.fix


def test_on_a_saturated_host_more_workers_save_only_down_to_the_floor(tmp_path):
    # a 1.5-CPU quota: the worker's core and the training process's third of one fill it
    a = _mnist_with(tmp_path, cores=1.5)
    f = next(f for f in a.findings if f.code == "input-starved")
    ev = f.evidence
    assert ev["cores_saturated"] is True and ev["host_cores"] == 1.5
    main = ev["training_process_busy_cores"]
    # (the evidence's busy cores are rounded to 0.01)
    assert ev["input_floor_ms"] == pytest.approx(
        ev["workers_cpu_ms_per_step"] / (1.5 - main), rel=0.01
    )
    saving = ev["saving_by_remedy"]["workers"]
    assert 0 < saving < 0.5 * f.time_lost_ms_per_step
    workers = next(r for r in a.remedies if r.key == "workers")
    assert workers.saving_ms_per_step == pytest.approx(saving, abs=1e-3)
    assert "no core to spare" in f.fix and "Raise num_workers" not in f.fix
    assert "1 worker keeps 1.0 of its 1.5 cores busy" in f.fix
