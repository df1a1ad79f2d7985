"""`membound diagnose` end to end on CPU: a tiny training script run in-process, unmodified."""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from torch.optim.optimizer import _global_optimizer_post_hooks
from torch.utils.data.dataloader import _BaseDataLoaderIter

import membound
import membound.analysis
import membound.report
from membound.cli import main
from membound.trace import capture as cap

TRAIN = textwrap.dedent(
    """
    import json, sys
    import torch

    out = sys.argv[1]
    iters = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    with open(out + "/argv.json", "w") as f:
        json.dump({"argv": sys.argv, "path0": sys.path[0], "name": __name__}, f)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i in range(iters):
        opt.zero_grad()
        model(torch.randn(8, 16)).pow(2).mean().backward()
        opt.step()
    if "--crash" in sys.argv:
        raise ValueError("planted failure")
    open(out + "/finished", "w").close()
    if "--exit3" in sys.argv:
        sys.exit(3)
    """
)


@pytest.fixture
def script(tmp_path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    return path


@pytest.fixture(autouse=True)
def _fake_analysis(monkeypatch):
    """Analysis is another module's job; here it only has to be called, or to fail politely."""
    calls = []

    def analyze(paths, ceilings=None):
        calls.append(paths)
        return type("A", (), {"notes": []})()

    def emit(analysis, options, console=None):
        if options.json_path:
            Path(options.json_path).write_text(json.dumps({"notes": analysis.notes}))

    monkeypatch.setattr(membound.analysis, "analyze", analyze, raising=False)
    monkeypatch.setattr(membound.report, "emit", emit, raising=False)
    hooks = len(_global_optimizer_post_hooks)
    nxt = _BaseDataLoaderIter.__dict__["__next__"]
    argv, path = sys.argv[:], sys.path[:]
    yield calls
    assert len(_global_optimizer_post_hooks) == hooks
    assert _BaseDataLoaderIter.__dict__["__next__"] is nxt
    assert cap.active() is None
    assert sys.argv == argv and sys.path == path


def markers(trace: Path) -> int:
    with gzip.open(trace, "rt") as f:
        events = json.load(f)["traceEvents"]
    return len({e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#")})


def diagnose(tmp_path, *cmd, opts=()):
    out = tmp_path / "out"
    return main(["diagnose", "--wait", "1", "--warmup", "1", "--steps", "3", "--report-at-end", "--out", str(out),
                 *map(str, opts), "--", *map(str, cmd)]), out  # fmt: skip


def test_runs_the_script_with_its_argv_and_reports(tmp_path, script, _fake_analysis, capsys):
    code, out = diagnose(
        tmp_path, "python", script, tmp_path, "8", opts=["--json", tmp_path / "r.json"]
    )
    assert code == 0
    seen = json.loads((tmp_path / "argv.json").read_text())
    assert seen == {
        "argv": [str(script), str(tmp_path), "8"],
        "path0": str(tmp_path),
        "name": "__main__",
    }
    assert (tmp_path / "finished").exists()  # the script ran to its end
    assert markers(out / "trace.json.gz") == 3
    assert _fake_analysis == [[str(out / "trace.json.gz")]]
    assert (tmp_path / "r.json").exists()
    # the report's capture notes come from the meta beside the trace (the analysis reads it)
    from membound.trace.capture_meta import notes_from_meta, read_meta

    notes = notes_from_meta(read_meta(out / "trace.json.gz"))
    assert "captured 3 step(s)" in notes[0] and "optimizer" in notes[0]
    assert "captured 3 step(s)" in capsys.readouterr().err


def test_exit_code_is_the_scripts(tmp_path, script):
    code, out = diagnose(tmp_path, script, tmp_path, "8", "--exit3")
    assert code == 3
    assert markers(out / "trace.json.gz") == 3


def test_crash_keeps_the_trace_and_says_so(tmp_path, script, capsys):
    code, out = diagnose(tmp_path, script, tmp_path, "8", "--crash")
    assert code == 1
    err = capsys.readouterr().err
    assert "ValueError: planted failure" in err
    assert 'train.py", line' in err and "runpy" not in err  # python's own traceback shape
    assert "crashed (ValueError: planted failure); the capture kept 3 step(s)" in err
    assert str(out / "trace.json.gz") in err
    assert markers(out / "trace.json.gz") == 3


def test_short_run_analyzes_what_was_captured(tmp_path, script, capsys, _fake_analysis):
    code, out = diagnose(tmp_path, script, tmp_path, "4")  # 1 + 1 + 3 would need 5
    assert code == 0
    assert "ended after 2 of 3" in capsys.readouterr().err
    assert json.loads((out / "capture.json").read_text())["steps_captured"] == 2
    assert len(_fake_analysis) == 1


def test_stop_after_capture_ends_the_script(tmp_path, script, capsys):
    code, out = diagnose(tmp_path, script, tmp_path, "50", "--exit3", opts=["--stop-after-capture"])
    assert code == 0
    assert not (tmp_path / "finished").exists()
    assert "stopped" in capsys.readouterr().err
    assert markers(out / "trace.json.gz") == 3


def test_module_form(tmp_path, monkeypatch):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text(TRAIN)
    monkeypatch.chdir(tmp_path)
    code, out = diagnose(tmp_path, "-m", "mypkg.train", tmp_path, "8", "--exit3")
    assert code == 3
    seen = json.loads((tmp_path / "argv.json").read_text())
    assert seen["argv"] == [str(pkg / "train.py"), str(tmp_path), "8", "--exit3"]
    assert seen["name"] == "__main__"
    assert markers(out / "trace.json.gz") == 3


def test_inference_loop_steps_on_dataloader_batches(tmp_path):
    path = tmp_path / "infer.py"
    path.write_text(
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n"
        "m = torch.nn.Linear(8, 8)\n"
        "with torch.no_grad():\n"
        "    for (x,) in DataLoader(TensorDataset(torch.randn(64, 8)), batch_size=4):\n"
        "        m(x)\n"
    )
    code, out = diagnose(tmp_path, path)
    assert code == 0
    assert json.loads((out / "capture.json").read_text())["step_source"] == "dataloader"
    assert markers(out / "trace.json.gz") == 3


def test_explicit_membound_step(tmp_path):
    path = tmp_path / "custom.py"
    path.write_text(
        "import torch, membound\n"
        "for _ in range(10):\n"
        "    torch.randn(32, 32) @ torch.randn(32, 32)\n"
        "    membound.step()\n"
    )
    code, out = diagnose(tmp_path, path)
    assert code == 0
    assert json.loads((out / "capture.json").read_text())["step_source"] == "explicit"
    assert markers(out / "trace.json.gz") == 3


def test_analysis_failure_keeps_exit_code_and_trace(tmp_path, script, monkeypatch, capsys):
    def broken(paths, ceilings=None):
        raise RuntimeError("rule exploded")

    monkeypatch.setattr(membound.analysis, "analyze", broken, raising=False)
    code, out = diagnose(tmp_path, script, tmp_path, "8", "--exit3")
    assert code == 3
    err = capsys.readouterr().err
    assert "analysis failed (RuntimeError: rule exploded); the trace is kept" in err
    assert "Traceback" not in err
    assert (out / "trace.json.gz").exists()


@pytest.mark.parametrize(
    "cmd, message",
    [
        (["missing.py"], "does not exist"),
        (["-m", "no_such_mod_xyz"], "no module named"),
        ([], "no script given"),
    ],
)
def test_bad_command_is_one_line_exit_2(tmp_path, capsys, monkeypatch, cmd, message):
    monkeypatch.chdir(tmp_path)
    code = main(["diagnose", "--", *cmd])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1


def test_subprocess_python_dash_m_membound(tmp_path, script):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(membound.__file__).parents[1]),
                                                       os.environ.get("PYTHONPATH", "")]))  # fmt: skip
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "membound", "diagnose", "--wait", "1", "--steps", "2",
         "--no-analyze", "--out", str(out), "--", str(script), str(tmp_path), "8", "--exit3"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    assert markers(out / "trace.json.gz") == 2
    assert "captured 2 step(s)" in proc.stderr


@pytest.mark.gpu
def test_planted_script_on_cuda(tmp_path):
    root = Path(__file__).resolve().parents[2]
    code, out = diagnose(
        tmp_path, root / "examples" / "planted" / "small_block.py", opts=["--stop-after-capture"]
    )
    assert code == 0
    with gzip.open(out / "trace.json.gz", "rt") as f:
        events = json.load(f)["traceEvents"]
    assert any(e.get("cat") == "kernel" for e in events)
    assert markers(out / "trace.json.gz") == 3


def test_relative_out_survives_a_chdir_in_the_script(tmp_path, monkeypatch):
    path = tmp_path / "wander.py"
    (tmp_path / "elsewhere").mkdir()
    path.write_text(
        "import os, torch\n"
        f"os.chdir({str(tmp_path / 'elsewhere')!r})\n"
        "m = torch.nn.Linear(4, 4)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(6):\n    m(torch.randn(2, 4)).sum().backward()\n    opt.step()\n"
    )
    monkeypatch.chdir(tmp_path)
    code = main(["diagnose", "--wait", "0", "--warmup", "1", "--steps", "2", "--no-analyze",
                 "--out", "rel-out", "--", str(path)])  # fmt: skip
    assert code == 0
    assert markers(tmp_path / "rel-out" / "trace.json.gz") == 2


def test_keyboard_interrupt_keeps_the_capture(tmp_path, script, capsys):
    path = tmp_path / "interrupted.py"
    path.write_text(TRAIN + "\nraise KeyboardInterrupt\n")
    code, out = diagnose(tmp_path, path, tmp_path, "8")
    assert code == 130
    assert "interrupted" in capsys.readouterr().err
    assert markers(out / "trace.json.gz") == 3


def test_bad_ceilings_file_fails_before_the_script_runs(tmp_path, script, capsys):
    code, _ = diagnose(tmp_path, script, tmp_path, "8", opts=["--ceilings", tmp_path / "no.json"])
    assert code == 2
    assert not (tmp_path / "argv.json").exists()
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "command, script, module, args",
    [
        (["--", "train.py", "--lr", "1"], "train.py", None, ["--lr", "1"]),
        (["python3", "-u", "-X", "dev", "train.py", "-m"], "train.py", None, ["-m"]),
        (["/usr/bin/python", "-m", "pkg.train", "x"], None, "pkg.train", ["x"]),
        (["-m", "pkg.train"], None, "pkg.train", []),
    ],
)
def test_parse_command(command, script, module, args):
    from membound.trace.runner import parse_command

    target = parse_command(command)
    assert (target.script, target.module, target.args) == (script, module, args)


def test_unsupported_python_option_is_bad_input():
    from membound.errors import BadInput
    from membound.trace.runner import parse_command

    with pytest.raises(BadInput, match="-c is not supported"):
        parse_command(["python", "-c", "print(1)"])


@pytest.mark.parametrize("opts, expected", [((), "default"), (("--no-annotate",), None)])
def test_annotated_trace_next_to_the_trace_by_default(
    tmp_path, script, monkeypatch, opts, expected
):
    seen = {}

    def emit(analysis, options, console=None):
        seen["annotated_trace_path"] = options.annotated_trace_path

    monkeypatch.setattr(membound.report, "emit", emit, raising=False)
    code, out = diagnose(tmp_path, script, tmp_path, opts=opts)
    assert code == 0
    want = str(out / "trace.membound.json.gz") if expected == "default" else None
    assert seen["annotated_trace_path"] == want


def _capture_kwarg(monkeypatch, key: str) -> list:
    """The values of `key` each Capture made from now on was given, in order."""
    from membound.trace import capture as cap_mod

    seen = []
    real = cap_mod.Capture.__init__

    def init(self, *a, **kw):
        seen.append(kw.get(key))
        real(self, *a, **kw)

    monkeypatch.setattr(cap_mod.Capture, "__init__", init)
    return seen


def test_api_records_reaches_the_capture(tmp_path, script, monkeypatch):
    """`--api-records` is handed to the capture, "launches" by default (here, with no CUDA,
    one pass with CPU ops: nothing to switch off, and the meta says no timeline pass ran)."""
    seen = _capture_kwarg(monkeypatch, "api_records")
    code, out = diagnose(
        tmp_path, script, tmp_path, "8", opts=["--api-records", "all", "--no-analyze"]
    )
    assert code == 0 and seen == ["all"]
    code, out = diagnose(tmp_path, script, tmp_path, "8", opts=["--no-analyze"])
    assert code == 0 and seen == ["all", "launches"]
    meta = json.loads((out / "capture.json").read_text())
    assert meta["api_records"] is None
    with pytest.raises(SystemExit) as bad:
        main(["diagnose", "--api-records", "some", "--", str(script)])
    assert bad.value.code == 2


def test_sleeping_syncs_reaches_the_capture_and_says_why_not(tmp_path, script, monkeypatch, capsys):
    """`--syncs` is handed to the capture ("sleep-profiled" by default; `--sleeping-syncs` is
    `--syncs sleep`); with no CUDA here the syncs cannot sleep: for `sleep` one line on stderr
    says so, the meta keeps why in every mode but spin, and the run goes on. The distributed
    relaunch passes a mode other than the default on."""
    from membound.commands.diagnose import _forward_args

    seen = _capture_kwarg(monkeypatch, "sleeping_syncs")
    code, out = diagnose(tmp_path, script, tmp_path, "8", opts=["--no-analyze"])
    assert code == 0 and seen == ["sleep-profiled"]
    meta = json.loads((out / "capture.json").read_text())
    assert meta["sleeping_syncs"] == "no CUDA device" and meta["sleeping_syncs_phases"] is None
    code, out = diagnose(tmp_path, script, tmp_path, "8", opts=["--syncs", "spin", "--no-analyze"])
    assert code == 0 and seen[-1] == "spin"
    meta = json.loads((out / "capture.json").read_text())
    assert meta["sleeping_syncs"] is None and meta["sleeping_syncs_phases"] is None
    capsys.readouterr()
    code, out = diagnose(tmp_path, script, tmp_path, "8", opts=["--sleeping-syncs", "--no-analyze"])
    assert code == 0 and seen[-1] == "sleep"
    assert json.loads((out / "capture.json").read_text())["sleeping_syncs"] == "no CUDA device"
    assert "--syncs sleep: the syncs still spin (no CUDA device)" in capsys.readouterr().err
    opts = ["--syncs", "sleep-profiled", "--no-analyze"]
    code, out = diagnose(tmp_path, script, tmp_path, "8", opts=opts)
    assert code == 0 and seen[-1] == "sleep-profiled"
    meta = json.loads((out / "capture.json").read_text())
    assert meta["sleeping_syncs"] == "no CUDA device" and meta["sleeping_syncs_phases"] is None
    args = argparse.Namespace(
        wait=1, warmup=1, steps=1, out="o", json=None, html=None, ceilings=None,
        stop_after_capture=False, no_analyze=False, syncs="sleep-profiled", command=["t.py"],
    )  # fmt: skip
    assert "--syncs" not in _forward_args(args)  # the default
    forwarded = _forward_args(argparse.Namespace(**{**vars(args), "syncs": "spin"}))
    assert forwarded[forwarded.index("--syncs") + 1] == "spin"


def test_the_plan_names_the_steps_whose_syncs_sleep(capsys):
    """With `--syncs sleep-profiled` on CUDA the capture adds 3 steps to the wait: the plan
    line says which steps they are, so the later first recorded step is not a surprise."""
    from types import SimpleNamespace

    from membound.commands.diagnose import _say_plan

    target = SimpleNamespace(label="train.py")
    capture = SimpleNamespace(
        wait=9, warmup=2, steps=8, out="membound-out", stop_after_capture=True,
        clock=SimpleNamespace(slept=3),
    )  # fmt: skip
    _say_plan(capture, target)
    err = capsys.readouterr().err
    assert "steps 12-19 will be recorded into membound-out; steps 7-9 time the host work " in err
    capture.clock.slept = 0
    _say_plan(capture, target)
    assert "time the host work" not in capsys.readouterr().err
