"""diagnose's background analysis starts once the unprofiled steps after the capture are
timed (run beside them it slowed a host-bound loop's 'after' steps), at a lower priority."""

from __future__ import annotations

from types import SimpleNamespace

from membound.commands import diagnose


class _FakeBackground:
    def __init__(self):
        self.started = False
        self.starts = 0

    def start(self, capture):
        self.started = True
        self.starts += 1


def _capture(tmp_path, timing_after):
    return SimpleNamespace(two_pass=False, trace_path=tmp_path / "trace.json.gz", out=tmp_path,
                           timing_after=timing_after, steps_taken=9)  # fmt: skip


def test_waits_for_the_after_steps(tmp_path, monkeypatch):
    monkeypatch.setattr(diagnose, "keep_ceilings", lambda *a: None)
    bg = _FakeBackground()
    progress = diagnose._Progress(SimpleNamespace(label="t.py"), bg, rank=None)
    cap = _capture(tmp_path, timing_after=True)
    progress("complete", cap)
    assert bg.starts == 0  # still timing the steps after the capture
    cap.timing_after = False
    progress("timed", cap)
    progress("timed", cap)
    assert bg.starts == 1


def test_starts_at_once_without_after_steps(tmp_path, monkeypatch):
    monkeypatch.setattr(diagnose, "keep_ceilings", lambda *a: None)
    bg = _FakeBackground()
    progress = diagnose._Progress(SimpleNamespace(label="t.py"), bg, rank=None)
    progress("complete", _capture(tmp_path, timing_after=False))
    assert bg.starts == 1


def test_the_analysis_process_runs_niced(tmp_path, monkeypatch):
    seen = {}

    class _Popen:
        def __init__(self, cmd, **kw):
            seen.update(kw, cmd=cmd)

    import subprocess

    monkeypatch.setattr(subprocess, "Popen", _Popen)
    args = SimpleNamespace(json=None, html=None, ceilings=None, format="plain", no_annotate=True,
                           annotate=None)  # fmt: skip
    bg = diagnose._Background(args)
    bg.start(SimpleNamespace(trace_path=tmp_path / "t.json.gz", out=tmp_path))
    assert (
        bg.started and callable(seen["preexec_fn"]) and seen["cmd"][2:4] == ["membound", "analyze"]
    )
