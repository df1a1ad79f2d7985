"""Issue 17, `membound diagnose` however the script ends: SIGTERM, os._exit, a syntax error,
Ctrl-C or a crash before the first step, a crash inside a recorded step. It exits with the
script's code, keeps what was captured, and says what happened in one line."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import membound
from membound.cli import main
from membound.trace import capture as cap
from membound.trace import step_marks
from membound.trace.step_marks import read_step_marks

#: `train.py WHEN HOW`: at loop iteration WHEN (0-based, before its optimizer step), end HOW
TRAIN = textwrap.dedent(
    """
    import os, signal, sys
    import torch

    when, how = int(sys.argv[1]), sys.argv[2]
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i in range(40):
        opt.zero_grad()
        model(torch.randn(4, 8)).pow(2).mean().backward()
        if i == when:
            if how == "sigterm":
                os.kill(os.getpid(), signal.SIGTERM)
            elif how == "os_exit":
                os._exit(7)
            elif how == "crash":
                raise ValueError("planted")
        opt.step()
    """
)
FAST = ["--wait", "1", "--warmup", "1", "--steps", "5"]  # steps 2-6 recorded (ProfilerStep#2-6)


@pytest.fixture
def script(tmp_path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    return path


def _meta(out: Path) -> dict:
    return json.loads((out / "capture.json").read_text())


def _markers(trace: Path) -> set[str]:
    with gzip.open(trace, "rt") as f:
        events = json.load(f)["traceEvents"]
    return {e["name"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#")}


@pytest.mark.skipif(
    signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL, reason="SIGTERM handled here"
)
def test_sigterm_mid_capture_keeps_the_capture_and_exits_143(tmp_path, script, capsys):
    out = tmp_path / "out"
    code = main(["diagnose", *FAST, "--no-analyze", "--out", str(out), "--", str(script), "4",
                 "sigterm"])  # fmt: skip
    assert code == 143
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is gone after
    assert cap.active() is None
    err = capsys.readouterr().err
    assert "was terminated (SIGTERM); the capture kept 2 step(s)" in err
    meta = _meta(out)
    assert meta["steps_captured"] == 2 and meta["ended"] == "was terminated (SIGTERM)"
    assert meta["recorded_steps"] == [2, 3] and meta["partial_step"] == 4
    assert (out / "trace.json.gz").exists()
    assert "ProfilerStep#2" in _markers(out / "trace.json.gz")


def _run(tmp_path, *argv, timeout=120):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(membound.__file__).parents[1]), os.environ.get("PYTHONPATH", "")]))  # fmt: skip
    return subprocess.run([sys.executable, "-m", "membound", *map(str, argv)],
                          capture_output=True, text=True, env=env, timeout=timeout)  # fmt: skip


def test_os_exit_mid_capture_writes_what_was_recorded(tmp_path, script):
    out = tmp_path / "out"
    proc = _run(tmp_path, "diagnose", *FAST, "--no-analyze", "--out", out, "--", script, "5",
                "os_exit")  # fmt: skip
    assert proc.returncode == 7, proc.stderr
    assert "called os._exit(7); the capture kept 3 step(s)" in proc.stderr
    meta = _meta(out)
    assert meta["ended"] == "called os._exit(7)" and meta["steps_captured"] == 3
    assert meta["recorded_steps"] == [2, 3, 4] and meta["partial_step"] == 5
    assert {"ProfilerStep#2", "ProfilerStep#4"} <= _markers(out / "trace.json.gz")
    assert read_step_marks(out / "capture.steps.jsonl") == [1, 2, 3, 4, 5]


def test_os_exit_before_recording_says_nothing_could_be_analysed(tmp_path, script):
    out = tmp_path / "out"
    proc = _run(tmp_path, "diagnose", "--wait", "3", "--steps", "2", "--out", out, "--",
                script, "2", "os_exit")  # fmt: skip
    assert proc.returncode == 7
    assert "called os._exit(7) after 2 step(s), before a recorded step was complete" in (
        proc.stderr
    )
    assert "Traceback" not in proc.stderr
    assert read_step_marks(out / "capture.steps.jsonl") == [1, 2]
    # and `analyze` of that folder says what the marks show
    again = _run(tmp_path, "analyze", out)
    assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1
    assert "marked 2 step(s) and ended before writing its trace" in again.stderr


def test_os_exit_in_a_forked_child_is_not_the_scripts(tmp_path):
    """A DataLoader worker ends with os._exit: it must not write the parent's capture."""
    c = cap.Capture(out=tmp_path, steps=1, wait=0, warmup=0)
    c._pid = os.getpid() + 1  # as a forked child sees its parent's capture
    called = []
    c.close = lambda *a, **k: called.append(True)
    c._on_os_exit(0)
    assert not called and c.exit_code is None


def test_step_marks_reach_the_disk_at_each_phase_change_and_within_the_flush_time(
    tmp_path, monkeypatch
):
    """The marks go to the file's buffer (a write a line cost a training step ~10 us on a CI
    core) and reach the disk at every phase change, at any exit, and at least every
    MARKS_FLUSH_S: a process killed outright loses at most that much of them."""
    import torch

    path = tmp_path / "capture.steps.jsonl"
    monkeypatch.setattr(step_marks, "MARKS_FLUSH_S", 3600.0)
    with cap.Capture(out=tmp_path, steps=2, wait=3, warmup=0) as c:
        c.step()
        c.step()
        assert read_step_marks(path) == []  # in the buffer: the wait goes on
        c.step()  # the recording starts: a phase change
        assert read_step_marks(path) == [1, 2, 3]
    assert read_step_marks(path) == [1, 2, 3]  # what the steps reached, at the exit

    monkeypatch.setattr(step_marks, "MARKS_FLUSH_S", 0.0)  # every mark due: on disk as it is made
    with cap.Capture(out=tmp_path / "b", steps=2, wait=1, warmup=0) as c:
        for _ in range(2):
            torch.randn(4, 4).sum()
            c.step()
            assert read_step_marks(tmp_path / "b" / "capture.steps.jsonl")[-1] == c.steps_taken


@pytest.mark.parametrize(
    "body, code, said",
    [
        ("x = 1\ndef f(:\n    pass\n", 1, "has a syntax error at {path}:2 (invalid syntax); "
                                             "it did not run and nothing was captured."),
        ("raise KeyboardInterrupt\n", 130, "was interrupted (Ctrl-C) before its first step; "
                                           "nothing was captured."),
        ("raise ValueError('early')\n", 1, "crashed (ValueError: early) before its first step; "
                                           "nothing was captured."),
    ],
)  # fmt: skip
def test_ending_before_the_first_step_is_named(tmp_path, capsys, body, code, said):
    path = tmp_path / "early.py"
    path.write_text(body)
    assert main(["diagnose", "--out", str(tmp_path / "o"), "--", str(path)]) == code
    err = capsys.readouterr().err
    assert said.format(path=path) in err
    assert "membound.step()" not in err and "crashed … call" not in err


def test_crash_inside_the_first_recorded_step_analyses_nothing_partial(
    tmp_path, script, capsys, monkeypatch
):
    import membound.analysis

    calls = []
    monkeypatch.setattr(membound.analysis, "analyze", lambda *a, **k: calls.append(a))
    out = tmp_path / "out"
    code = main(["diagnose", *FAST, "--report-at-end", "--out", str(out), "--", str(script),
                 "2", "crash"])  # fmt: skip
    assert code == 1
    err = capsys.readouterr().err
    assert "the capture kept 0 step(s)" in err and "no recorded step was complete" in err
    assert not calls  # a report of one partial step would be garbage
    meta = _meta(out)
    assert meta["partial_step"] == 2 and meta["recorded_steps"] == []


def test_crash_at_step_6_reports_the_steps_it_says_it_kept(tmp_path, script, capsys):
    """The printed count is the analysed count; the cut-short step is in no median."""
    out, report = tmp_path / "out", tmp_path / "r.json"
    code = main(["diagnose", *FAST, "--report-at-end", "--format", "plain", "--json",
                 str(report), "--out", str(out), "--", str(script), "5", "crash"])  # fmt: skip
    assert code == 1
    err = capsys.readouterr().err
    assert "crashed (ValueError: planted); the capture kept 3 step(s)" in err
    assert "step 6 was cut short and is left out" in err  # 1-based, as the user counts
    meta = _meta(out)
    assert meta["recorded_steps"] == [2, 3, 4] and meta["partial_step"] == 5
    steps = json.loads(report.read_text())["steps"]
    assert steps["count"] == 3
    assert [s["index"] for s in steps["per_step"]] == meta["recorded_steps"]
    assert "ProfilerStep#5" in _markers(out / "trace.json.gz")  # in the trace, not the report
