"""membound.profile / membound.step: schedules, step sources, hooks, partial captures (CPU)."""

from __future__ import annotations

import gzip
import json

import pytest
import torch
from torch.optim.optimizer import _global_optimizer_post_hooks
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.dataloader import _BaseDataLoaderIter

import membound
from membound.errors import BadInput
from membound.trace import capture as cap
from membound.trace import graph_hooks


def step_markers(path) -> list[str]:
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    names = {e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#")}
    return sorted(names, key=lambda n: int(n.split("#")[1]))


def train_iteration(model, opt):
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()


@pytest.fixture
def model_opt():
    model = torch.nn.Linear(8, 8)
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


@pytest.fixture(autouse=True)
def _no_lingering_hooks():
    hooks_before = len(_global_optimizer_post_hooks)
    next_before = _BaseDataLoaderIter.__dict__["__next__"]
    zero_grad_before = torch.nn.Module.__dict__["zero_grad"]
    yield
    assert len(_global_optimizer_post_hooks) == hooks_before
    assert _BaseDataLoaderIter.__dict__["__next__"] is next_before
    assert torch.nn.Module.__dict__["zero_grad"] is zero_grad_before
    assert cap.active() is None


def test_optimizer_steps_drive_the_schedule(tmp_path, model_opt):
    with membound.profile(steps=3, wait=1, warmup=1, out=tmp_path) as p:
        assert cap.active() is p
        assert len(_global_optimizer_post_hooks) >= 1  # installed while active
        for _ in range(5):
            assert not p.complete
            train_iteration(*model_opt)
        assert p.complete  # wait + warmup + steps = 5 boundaries
        # the profiler is off; membound's step timer times `steps` more steps, then lets go:
        # the DataLoader patch is gone although the context is still open
        assert cap.active() is p
        for _ in range(3):
            train_iteration(*model_opt)
        assert not hasattr(_BaseDataLoaderIter.__dict__["__next__"], "__wrapped__")
        assert cap.active() is None
        train_iteration(*model_opt)
    assert p.trace_path == tmp_path / "trace.json.gz"
    assert p.source == "optimizer"
    assert p.steps_captured == 3
    assert step_markers(p.trace_path) == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    meta = json.loads((tmp_path / "capture.json").read_text())
    assert meta["step_source"] == "optimizer" and meta["steps_captured"] == 3
    assert meta["complete"] is True
    times = meta["step_times_ms"]  # wait=1: its one step warms up, so nothing before
    assert len(times["unprofiled"]) == 0
    assert len(times["profiled"]) == 3 and len(times["after"]) == 3
    assert all(t > 0 for t in times["profiled"] + times["after"])
    # what the process did per step in the timed phases (none before: wait=1)
    assert set(meta["process_per_step"]) == {"profiled", "after"}
    assert meta["process_per_step"]["after"]["cpu_ms"] >= 0
    assert set(meta["thread_per_step"]) <= {"profiled", "after"}  # Linux: both


def test_unprofiled_steps_leave_torchs_profiler_alone(tmp_path, model_opt, monkeypatch):
    """The steps the schedule waits through are timed as the user runs them: torch's
    `profile.step()` (its step record and schedule transit, ~13 us a step on a CI core,
    charged by the step timer to the loop) runs only from the step that ends the wait on;
    the recorded steps keep torch's numbering and the step marks file one line a boundary."""
    calls = []
    real = torch.profiler.profile.step

    def counted(self):
        calls.append(self.step_num)
        return real(self)

    monkeypatch.setattr(torch.profiler.profile, "step", counted)
    with membound.profile(steps=2, wait=4, warmup=1, out=tmp_path) as p:
        for _ in range(7):
            train_iteration(*model_opt)
    assert calls == [3, 4, 5, 6]  # the step_num each call found: 4 boundaries of the wait skipped
    assert step_markers(p.trace_path) == ["ProfilerStep#5", "ProfilerStep#6"]
    lines = [json.loads(x) for x in (tmp_path / "capture.steps.jsonl").read_text().splitlines()]
    bounds = [x["boundary"] for x in lines if "boundary" in x]
    assert bounds == list(range(len(bounds))) and len(bounds) >= 8
    assert all(isinstance(x["t"], float) for x in lines if "boundary" in x)


def test_step_timer_times_the_unprofiled_steps_before_and_after(tmp_path, model_opt):
    import time

    def slow_iteration(ms):
        time.sleep(ms / 1e3)  # a step of known host time
        train_iteration(*model_opt)

    with membound.profile(steps=2, wait=4, warmup=1, out=tmp_path):
        # the recorded steps take as long as those before them: steps before the capture
        # slower than the profiled ones would be warm-up (analysis.step_timing)
        for ms in (0, 30, 30, 30, 0, 30, 30, 80, 80, 5):
            slow_iteration(ms)
    times = json.loads((tmp_path / "capture.json").read_text())["step_times_ms"]
    # steps 1-3 (wait, the first warms up), 5-6 recorded, 7-8 after (steps=2 of them); a
    # sleep is never shorter than asked, a busy 2-core machine makes it longer
    assert len(times["unprofiled"]) == 3 and all(29 < t < 79 for t in times["unprofiled"])
    assert len(times["profiled"]) == 2 and all(29 < t < 79 for t in times["profiled"])
    assert len(times["after"]) == 2 and all(79 < t < 200 for t in times["after"])
    from membound.analysis.step_timing import StepTiming

    timing = StepTiming.from_meta({"step_times_ms": times})
    assert timing.unprofiled_ms == times["unprofiled"] and timing.after_ms == times["after"]


def test_stop_after_capture_times_no_step_after(tmp_path, model_opt):
    with pytest.raises(cap.CaptureDone):
        with membound.profile(steps=2, wait=3, warmup=1, out=tmp_path, stop_after_capture=True):
            for _ in range(10):
                train_iteration(*model_opt)
    times = json.loads((tmp_path / "capture.json").read_text())["step_times_ms"]
    assert len(times["unprofiled"]) == 2 and len(times["after"]) == 0
    assert cap.active() is None


def test_second_optimizer_does_not_double_step(tmp_path):
    a, b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)
    opt_a = torch.optim.SGD(a.parameters(), lr=0.01)
    opt_b = torch.optim.SGD(b.parameters(), lr=0.01)
    with membound.profile(steps=2, wait=1, warmup=1, out=tmp_path) as p:
        for _ in range(3):
            train_iteration(a, opt_a)
            train_iteration(b, opt_b)
        assert not p.complete  # 3 iterations, not 6 boundaries
        train_iteration(a, opt_a)
        assert p.complete
    assert len(step_markers(p.trace_path)) == 2


def test_dataloader_batches_when_there_is_no_optimizer(tmp_path):
    model = torch.nn.Linear(8, 8)
    loader = DataLoader(TensorDataset(torch.randn(40, 8)), batch_size=4)
    with membound.profile(steps=3, wait=1, warmup=1, out=tmp_path) as p:
        assert hasattr(_BaseDataLoaderIter.__dict__["__next__"], "__wrapped__")  # patched
        with torch.no_grad():
            for (x,) in loader:
                model(x)
    assert p.source == "dataloader"
    assert p.complete and p.steps_captured == 3
    assert len(step_markers(p.trace_path)) == 3
    assert any("DataLoader" in n for n in p.capture_notes())


def test_training_loop_with_dataloader_steps_on_the_optimizer(tmp_path, model_opt):
    model, opt = model_opt
    loader = DataLoader(TensorDataset(torch.randn(40, 8)), batch_size=4)
    with membound.profile(steps=3, wait=1, warmup=1, out=tmp_path) as p:
        for (x,) in loader:
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
    assert p.source == "optimizer"
    assert p.notes == []  # the DataLoader never stepped, so nothing switched
    assert len(step_markers(p.trace_path)) == 3


def test_gradient_accumulation_hands_over_to_the_optimizer(tmp_path, model_opt):
    """Two batches before the first optimizer step look like an inference loop at first; the
    optimizer takes over when it fires and the recorded steps are whole iterations."""
    model, opt = model_opt
    loader = DataLoader(TensorDataset(torch.randn(96, 8)), batch_size=2)
    with membound.profile(steps=3, wait=3, warmup=1, out=tmp_path) as p:
        for i, (x,) in enumerate(loader):
            model(x).sum().backward()
            if i % 4 == 3:  # one optimizer step per 4 micro-batches
                opt.step()
                opt.zero_grad()
        assert p.complete
    assert p.source == "optimizer"
    assert any("switched from dataloader to optimizer after 3 step(s)." in n for n in p.notes)
    assert len(step_markers(p.trace_path)) == 3


def manual_iteration(model, lr=0.01, micro=1):
    """The word-language-model example's update: no optimizer, no DataLoader."""
    model.zero_grad()
    for _ in range(micro):
        model(torch.randn(4, 8)).sum().backward()
    for q in model.parameters():
        q.data.add_(q.grad, alpha=-lr)


def test_hand_written_update_steps_on_the_models_zero_grad(tmp_path):
    """No optimizer and no DataLoader (the LSTM example found no step on the H100): the
    model's zero_grad marks the iteration, from its second call, one boundary per
    iteration however many micro-batches it accumulates; the steps after are timed too."""
    model = torch.nn.Linear(8, 8)
    with membound.profile(steps=3, wait=2, warmup=1, out=tmp_path) as p:
        assert torch.nn.Module.__dict__["zero_grad"].__wrapped__  # patched while active
        for _ in range(7):
            manual_iteration(model, micro=3)
        assert p.complete and p.steps_taken == 6  # 7 calls: the first only arms it
        for _ in range(4):  # the steps timed after the capture, then it lets go
            manual_iteration(model, micro=3)
        assert cap.active() is None
    assert p.source == "zero_grad" and p.notes == []
    assert step_markers(p.trace_path) == ["ProfilerStep#3", "ProfilerStep#4", "ProfilerStep#5"]
    meta = json.loads((tmp_path / "capture.json").read_text())
    assert meta["step_source"] == "zero_grad"
    assert len(meta["step_times_ms"]["after"]) == 3
    assert any("zero_grad" in n for n in p.capture_notes())


def test_an_optimizer_loop_never_steps_on_zero_grad(tmp_path, model_opt):
    """model.zero_grad() beside an optimizer, with gradient accumulation and no DataLoader
    (nanoGPT's loop): the optimizer marks every step and nothing switches."""
    model, opt = model_opt
    with membound.profile(steps=2, wait=1, warmup=1, out=tmp_path) as p:
        for _ in range(4):
            model.zero_grad()
            for _ in range(4):
                model(torch.randn(4, 8)).sum().backward()
            opt.step()
    assert p.source == "optimizer" and p.notes == []
    assert p.complete and len(step_markers(p.trace_path)) == 2


def test_only_the_first_modules_zero_grad_marks_the_iteration(tmp_path):
    enc, dec = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)
    with membound.profile(steps=2, wait=1, warmup=1, out=tmp_path) as p:
        for _ in range(4):
            manual_iteration(enc)
            manual_iteration(dec)
        assert p.steps_taken == 3  # 4 iterations, not 8 boundaries
    assert p.source == "zero_grad"


def test_a_dataloader_loop_steps_on_its_batches_not_on_zero_grad(tmp_path):
    model = torch.nn.Linear(8, 8)
    loader = DataLoader(TensorDataset(torch.randn(40, 8)), batch_size=4)
    with membound.profile(steps=3, wait=1, warmup=1, out=tmp_path) as p:
        for (x,) in loader:
            model.zero_grad()
            model(x).sum().backward()
    assert p.source == "dataloader" and p.notes == []
    assert len(step_markers(p.trace_path)) == 3


def test_explicit_step_wins_over_the_optimizer(tmp_path, model_opt):
    with membound.profile(steps=2, wait=1, warmup=1, out=tmp_path) as p:
        for _ in range(6):
            for _ in range(3):  # three optimizer steps per explicit step
                train_iteration(*model_opt)
            membound.step()
    assert p.source == "explicit"
    assert p.complete
    assert any("switched from optimizer to explicit" in n for n in p.notes)
    assert len(step_markers(p.trace_path)) == 2


def test_explicit_only_loop(tmp_path):
    with membound.profile(steps=2, wait=0, warmup=1, out=tmp_path) as p:
        for _ in range(3):
            torch.randn(16, 16) @ torch.randn(16, 16)
            membound.step()
    assert p.source == "explicit" and p.complete
    assert step_markers(p.trace_path) == ["ProfilerStep#1", "ProfilerStep#2"]


def test_step_without_capture_is_a_noop():
    membound.step()
    assert cap.active() is None


def test_loop_ending_early_keeps_the_partial_trace(tmp_path, model_opt):
    with membound.profile(steps=8, wait=1, warmup=1, out=tmp_path) as p:
        for _ in range(5):
            train_iteration(*model_opt)
    assert p.written and not p.complete
    assert p.steps_captured == 3
    assert any("ended after 3 of 8" in n for n in p.notes)
    # 3 complete steps plus the one in progress when the loop ended
    assert len(step_markers(p.trace_path)) == 4


def test_no_boundary_writes_no_trace_and_says_why(tmp_path):
    with membound.profile(steps=2, out=tmp_path) as p:
        torch.randn(8, 8).sum()
    assert not p.written and not p.trace_path.exists()
    assert "membound.step()" in p.notes[-1]
    with pytest.raises(BadInput, match="no trace was captured"):
        p.analyze()


def test_nested_capture_is_refused(tmp_path):
    with membound.profile(steps=1, out=tmp_path / "a"):
        with pytest.raises(BadInput, match="already active"):
            with membound.profile(steps=1, out=tmp_path / "b"):
                pass


def test_bad_schedule_is_refused(tmp_path):
    with pytest.raises(BadInput, match="steps must be at least 1"):
        membound.profile(steps=0, out=tmp_path)


def test_hooks_removed_when_the_loop_raises(tmp_path, model_opt):
    with pytest.raises(RuntimeError, match="boom"):
        with membound.profile(steps=4, wait=0, warmup=1, out=tmp_path) as p:
            for _ in range(3):
                train_iteration(*model_opt)
            raise RuntimeError("boom")
    assert p.written and p.steps_captured == 2


def test_report_analyzes_the_trace_and_adds_capture_notes(tmp_path, model_opt, monkeypatch):
    import membound.analysis
    import membound.report

    class FakeAnalysis:
        notes: list

    seen = {}

    def fake_analyze(paths, ceilings=None):
        seen["paths"] = paths
        a = FakeAnalysis()
        a.notes = ["from analysis"]
        return a

    def fake_emit(analysis, options, console=None):
        seen["json"] = options.json_path
        seen["emitted"] = analysis

    monkeypatch.setattr(membound.analysis, "analyze", fake_analyze, raising=False)
    monkeypatch.setattr(membound.report, "emit", fake_emit, raising=False)
    with membound.profile(steps=2, wait=0, warmup=1, out=tmp_path) as p:
        for _ in range(4):
            train_iteration(*model_opt)
    analysis = p.report(json_path=tmp_path / "r.json")
    assert seen["paths"] == [str(tmp_path / "trace.json.gz")]
    assert seen["json"] == tmp_path / "r.json"
    assert seen["emitted"] is analysis
    assert analysis.notes[0] == "from analysis"
    assert "step boundaries from optimizer steps" in analysis.notes[1]
    assert p.analyze() is analysis  # cached: notes are not appended twice
    assert len(analysis.notes) == 2


@pytest.mark.gpu
def test_cuda_capture_takes_a_timeline_pass_and_an_ops_pass(tmp_path):
    """On CUDA: the timeline trace holds GPU activity, runtime calls and membound's own marks
    (no CPU op), the ops trace CPU ops with shapes; the analysis joins them."""
    from torch.utils.data import DataLoader, TensorDataset

    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.LayerNorm(256)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(TensorDataset(torch.randn(64 * 16, 256)), batch_size=64)
    with membound.profile(
        steps=3, wait=2, warmup=1, out=tmp_path, ops_steps=2, sleeping_syncs="spin"
    ) as p:
        for (x,) in loader:
            opt.zero_grad()
            model(x.cuda(non_blocking=True)).sum().backward()
            opt.step()
    with gzip.open(p.trace_path, "rt") as f:
        events = json.load(f)["traceEvents"]
    cats = {e.get("cat") for e in events}
    assert "kernel" in cats and "cuda_runtime" in cats and "cpu_op" not in cats
    assert step_markers(p.trace_path) == ["ProfilerStep#3", "ProfilerStep#4", "ProfilerStep#5"]
    assert sum("DataLoader" in str(e.get("name")) for e in events) >= 3
    meta = json.loads(p.meta_path.read_text())
    assert meta["timeline"] == "gpu+host marks" and meta["ops_trace"] == "trace.ops.json.gz"
    with gzip.open(p.ops_path, "rt") as f:
        ops = json.load(f)["traceEvents"]
    assert any(e.get("cat") == "cpu_op" and "Input Dims" in (e.get("args") or {}) for e in ops)
    times = meta["step_times_ms"]
    assert len(times["unprofiled"]) == 1 and len(times["profiled"]) == 3
    assert len(times["after"]) == 3  # 16 batches: 2 + 1 + 3 + 1 + 2 ops steps, then 3 timed
    a = membound.analyze(p.trace_path)
    assert len(a.steps) == 3 and a.unprofiled_step_ms is not None
    assert any(r.name == "aten::addmm" for r in a.ops)


@pytest.mark.gpu
def test_cuda_profile_sleeps_its_syncs_only_in_the_added_steps_and_the_passes(tmp_path):
    """`membound.profile`'s default (`--syncs sleep-profiled`, as `membound diagnose`'s) on
    CUDA: 3 unprofiled steps are added to the wait and sleep, so the recorded steps start 3
    later; the wait's own steps and those after the capture spin (the context's flags set
    back). Written 2026-12-07 after the CLI's H100 run (`benchmarks/probe_ctx_flags.py`);
    this test itself had not run on a GPU then."""
    import ctypes

    model = torch.nn.Linear(256, 256).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with membound.profile(steps=2, wait=2, warmup=1, out=tmp_path, ops_steps=1) as p:
        assert p.wait == 5 and p.clock.slept == 3
        for _ in range(16):
            opt.zero_grad()
            model(torch.randn(64, 256, device="cuda")).sum().backward()
            opt.step()
            torch.cuda.synchronize()
    assert step_markers(p.trace_path) == ["ProfilerStep#6", "ProfilerStep#7"]
    meta = json.loads(p.meta_path.read_text())
    assert meta["sleeping_syncs"] == "ok"
    assert meta["sleeping_syncs_phases"] == ["slept", "profiled"]
    times = meta["step_times_ms"]
    assert len(times["unprofiled"]) == 1 and len(times["slept"]) == 3
    flags = ctypes.c_uint(0)
    assert ctypes.CDLL("libcuda.so.1").cuCtxGetFlags(ctypes.byref(flags)) == 0
    assert flags.value & 0x07 != 0x04  # spinning (or the driver's auto choice) again


@pytest.mark.gpu
def test_timeline_pass_flag_follows_the_passes(tmp_path):
    """membound._profiling.timeline_pass is True only while the GPU-only timeline pass records
    (membound's norms stay on their cheap path then) and False in the ops pass and after."""
    from membound import _profiling

    model = torch.nn.Linear(64, 64).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    seen = []
    with membound.profile(steps=2, wait=1, warmup=1, out=tmp_path, ops_steps=2):
        for _ in range(12):
            seen.append(_profiling.timeline_pass)
            opt.zero_grad()
            model(torch.randn(8, 64, device="cuda")).sum().backward()
            opt.step()
    assert seen[0] is True and False in seen  # the timeline pass, then the ops pass
    assert seen.index(False) > 2 and all(not v for v in seen[seen.index(False) :])
    assert _profiling.timeline_pass is False


def test_cpu_capture_never_flags_a_timeline_pass(tmp_path, model_opt):
    from membound import _profiling

    model, opt = model_opt
    with membound.profile(steps=2, wait=1, warmup=0, out=tmp_path):
        for _ in range(4):
            assert _profiling.timeline_pass is False
            opt.zero_grad()
            model(torch.randn(4, 8)).sum().backward()
            opt.step()
    assert _profiling.timeline_pass is False


def test_samples_per_step_from_the_loaders_batches(tmp_path):
    """The capture counts the DataLoader samples of the recorded steps (the leading dim of
    each batch's first tensor), so compare can show per-sample throughput."""
    from torch.utils.data import DataLoader, TensorDataset

    from membound.trace.capture import batch_size

    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(
        TensorDataset(torch.randn(12 * 8, 8), torch.randn(12 * 8, 1)), batch_size=12
    )
    with membound.profile(steps=3, wait=1, warmup=1, out=tmp_path) as p:
        for x, y in loader:
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    meta = json.loads(p.meta_path.read_text())
    assert meta["samples_per_step"] == 12.0
    a = membound.analyze(p.trace_path)
    assert a.samples_per_step == 12.0
    assert batch_size({"input_ids": torch.zeros(4, 7)}) == 4
    assert batch_size([[torch.zeros(())], torch.zeros(5, 2)]) == 5
    assert batch_size("text") is None and batch_size(None) is None


def test_cpu_capture_leaves_cupti_alone(tmp_path, model_opt, monkeypatch):
    monkeypatch.delenv("TEARDOWN_CUPTI", raising=False)
    with membound.profile(steps=1, wait=1, warmup=0, out=tmp_path):
        for _ in range(4):
            train_iteration(*model_opt)
    assert "TEARDOWN_CUPTI" not in __import__("os").environ
    assert json.loads((tmp_path / "capture.json").read_text())["cupti_teardown"] is None


class _FakeGraph:
    """Stands in for torch.cuda.CUDAGraph on a CPU machine: what runs between its
    capture_begin and capture_end is what a real capture would record."""

    def capture_begin(self, *args, **kwargs):
        self.began = True

    def capture_end(self):
        self.ended = True


def _graph_capture(tmp_path, monkeypatch, wait=3):
    monkeypatch.setattr(torch.cuda, "CUDAGraph", _FakeGraph)
    c = cap.Capture(steps=1, wait=wait, warmup=0, out=tmp_path)
    c.graph_hooks.install()
    return c


def test_a_graph_capture_before_the_timeline_pass_is_recorded_with_its_ops(tmp_path, monkeypatch):
    c = _graph_capture(tmp_path, monkeypatch)
    a = torch.randn(64, 64)
    g = _FakeGraph()
    g.capture_begin(pool=None)
    torch.mm(a, a)  # launched inside the capture
    g.capture_end()
    assert g.began and g.ended
    assert c.graph_captures == [{"trace": "trace.capture0.json.gz", "index": 0, "step": 0}]
    events = json.load(gzip.open(tmp_path / "trace.capture0.json.gz"))["traceEvents"]
    mm = [e for e in events if e.get("name") == "aten::mm"]
    assert mm and mm[0]["args"]["Input Dims"] == [[64, 64], [64, 64]]  # shapes recorded
    assert not torch.autograd.profiler._is_profiler_enabled  # stopped after the capture
    # once the timeline pass may run (steps_taken >= wait), captures are left alone
    c.steps_taken = 3
    g.capture_begin()
    g.capture_end()
    assert len(c.graph_captures) == 1
    c.graph_hooks.remove()
    assert "__wrapped__" not in _FakeGraph.__dict__["capture_begin"].__dict__
    assert _FakeGraph.capture_end.__name__ == "capture_end" and not hasattr(
        _FakeGraph.capture_end, "__wrapped__"
    )


def test_graph_captures_stop_at_the_limit_and_a_failed_capture_writes_nothing(
    tmp_path, monkeypatch
):
    c = _graph_capture(tmp_path, monkeypatch, wait=100)

    for _ in range(graph_hooks.GRAPH_CAPTURES + 2):
        g = _FakeGraph()
        g.capture_begin()
        g.capture_end()
    assert len(c.graph_captures) == graph_hooks.GRAPH_CAPTURES
    assert sorted(p.name for p in tmp_path.glob("trace.capture*.json.gz")) == sorted(
        f"trace.capture{i}.json.gz" for i in range(graph_hooks.GRAPH_CAPTURES)
    )
    c.graph_hooks.remove()
    c2 = _graph_capture(tmp_path / "b", monkeypatch)

    def boom(self, *a, **k):
        raise RuntimeError("capture failed")

    monkeypatch.setattr(_FakeGraph, "capture_begin", boom)
    c2.graph_hooks.install()  # wraps the failing begin
    with pytest.raises(RuntimeError, match="capture failed"):
        _FakeGraph().capture_begin()
    assert c2.graph_captures == [] and not torch.autograd.profiler._is_profiler_enabled
    c2.graph_hooks.remove()


def test_torchs_cycle_warning_stays_out_of_the_users_output(tmp_path, model_opt):
    """torch warns once per process that a profiler clears its events each cycle; under
    `membound diagnose` on an H100 (torch 2.11) it printed between the script's own lines.
    A capture filters that one message (and no other) from its start on."""
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with membound.profile(steps=1, wait=1, warmup=0, out=tmp_path):
            warnings.warn(
                "Warning: Profiler clears events at the end of each cycle. Only events from the "
                "current cycle will be reported.",
                stacklevel=1,
            )
            warnings.warn("the user's own warning", stacklevel=1)
            for _ in range(3):
                train_iteration(*model_opt)
    assert [str(w.message) for w in seen] == ["the user's own warning"]


@pytest.mark.parametrize("switched", ["ok", "cuCtxSetFlags returned 1"])
def test_sleep_profiled_sleeps_in_steps_added_to_the_wait_and_the_passes(
    tmp_path, model_opt, monkeypatch, switched
):
    """`--syncs sleep-profiled` (`trace.sync_mode.LiveSwitch`, here a stand-in: the real one
    needs a CUDA context): the wait's own unprofiled steps spin; `SLEPT_STEPS` more are added
    to it and sleep (their phase "slept"), and so do the recorded steps; the syncs are set
    back when the recording ends, so the steps after it spin. The meta names the phases that
    slept and times the "slept" ones apart. A switch the driver refused leaves a note."""
    from membound.trace import sync_mode

    calls = []

    class Switch:
        def __init__(self):
            self.saved = None

        def sleep(self):
            calls.append(("sleep", len(c.clock.times) - 1))  # the boundary marked last
            self.saved = 0 if switched == "ok" else None
            return switched

        def restore(self):
            calls.append(("restore", len(c.clock.times) - 1))
            self.saved = None
            return "ok"

    monkeypatch.setattr(sync_mode, "LiveSwitch", Switch)
    monkeypatch.setattr(cap, "_has_cuda", lambda: True)  # as on CUDA
    c = cap.Capture(steps=2, wait=3, warmup=1, out=tmp_path, sleeping_syncs="sleep-profiled")
    assert c.wait == 3 + sync_mode.SLEPT_STEPS == 6 and c.clock.slept == 3
    with c:
        # the boundary after the wait's own (spinning) steps
        assert c._sleep_at == 3 and c.sleeping_syncs_state.startswith("not switched")
        for _ in range(14):
            train_iteration(*model_opt)
    meta = json.loads((tmp_path / "capture.json").read_text())
    times = meta["step_times_ms"]
    # steps 1-2 spin, 3-5 sleep, 6 warms the profiler up, 7-8 recorded, 9-10 after
    assert [len(times[k]) for k in ("unprofiled", "slept", "profiled", "after")] == [2, 3, 2, 2]
    if switched == "ok":
        assert calls == [("sleep", 3), ("restore", 9)]
        assert meta["sleeping_syncs"] == "ok"
        assert meta["sleeping_syncs_phases"] == ["slept", "profiled"]
    else:
        assert calls == [("sleep", 3)]
        assert meta["sleeping_syncs"] == switched and meta["sleeping_syncs_phases"] is None
        assert any("the syncs spun throughout" in n for n in c.notes)


def test_sleep_profiled_spins_where_it_cannot_switch(tmp_path, model_opt, monkeypatch):
    """`sleep-profiled` (the default) never changes the steps the report gives as the loop's:
    without a CUDA device, or with no unprofiled step before the capture (`--wait 0`), the
    syncs spin throughout, no step is added to the wait, and the meta says why."""
    c = cap.Capture(steps=1, wait=2, warmup=0, out=tmp_path, sleeping_syncs="sleep-profiled")
    assert c.wait == 2 and c.clock.slept == 0  # this machine: no CUDA device
    assert c.sync_mode == "spin" and c.sleeping_syncs_state == "no CUDA device"
    monkeypatch.setattr(cap, "_has_cuda", lambda: True)
    c = cap.Capture(steps=1, wait=0, warmup=0, out=tmp_path, sleeping_syncs="sleep-profiled")
    assert c.wait == 0 and c.clock.slept == 0 and c.sync_mode == "spin"
    with c:
        train_iteration(*model_opt)
        train_iteration(*model_opt)
    assert c._sleep_at is None and c.slept_phases == ()
    meta = json.loads((tmp_path / "capture.json").read_text())
    assert "slept" not in meta["step_times_ms"]
    assert meta["sleeping_syncs"] == (
        "not switched: --wait 0 leaves no unprofiled step before the capture"
    )
    with pytest.raises(BadInput, match="no such sync mode 'nap'"):
        cap.Capture(steps=1, out=tmp_path, sleeping_syncs="nap")
