"""`membound diagnose` as a new user meets it (issue 18): every run in a folder of its own with
`latest` pointing at it, lines that say when the capture starts and ends, the analysis in the
background while the script goes on, and output paths that do not follow the script's chdir."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from membound.cli import main
from membound.commands.diagnose import run_folder

TRAIN = textwrap.dedent(
    """
    import os, sys
    import torch

    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i in range(int(sys.argv[1])):
        opt.zero_grad()
        model(torch.randn(8, 16)).pow(2).mean().backward()
        opt.step()
        if i == 0 and len(sys.argv) > 2:
            os.chdir(sys.argv[2])  # scripts do this; relative report paths must not follow
    """
)
FAST = ["--wait", "2", "--warmup", "1", "--steps", "2"]


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    return path


def test_run_folders_never_collide_and_latest_points_at_the_newest(tmp_path):
    a = run_folder(tmp_path, "train.py", now=0.0)
    b = run_folder(tmp_path, "python train.py", now=0.0)  # the same second: a new folder
    c = run_folder(tmp_path, "-m pkg.train", now=60.0)
    assert a.name == "train-19700101-000000" and b.name == "train-19700101-000000-2"
    assert c.name == "train-19700101-000100"
    assert (tmp_path / "latest").resolve() == c.resolve()


def test_two_runs_in_one_folder_keep_both(tmp_path, script, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        assert main(["diagnose", *FAST, "--report-at-end", "--", str(script), "10"]) == 0
    runs = sorted(p for p in (tmp_path / "membound-out").iterdir() if p.name != "latest")
    assert len(runs) == 2 and all((r / "trace.json.gz").exists() for r in runs)
    assert (tmp_path / "membound-out" / "latest").resolve() == runs[-1].resolve()
    err = capsys.readouterr().err
    assert "capture started at step 4" in err and "capture written" in err
    assert "--stop-after-capture ends it" in err


def test_the_analysis_runs_in_the_background_and_paths_stay_put(
    tmp_path, script, monkeypatch, capfd
):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(tmp_path)
    code = main(["diagnose", *FAST, "--json", "r.json", "--out", "out", "--", str(script), "12",
                 str(elsewhere)])  # fmt: skip
    assert code == 0
    err = capfd.readouterr().err
    assert "analysing in the background" in err
    report = json.loads((tmp_path / "r.json").read_text())  # written where it was asked for
    assert report["steps"]["count"] == 2
    assert any("captured 2 step(s)" in n for n in report["notes"])
    assert not (elsewhere / "r.json").exists() and (tmp_path / "out" / "trace.json.gz").exists()
    assert Path(report["trace"]).parent == tmp_path / "out"


def test_the_ceilings_used_are_kept_beside_the_trace(tmp_path, script, monkeypatch):
    from membound.analysis import analyze
    from membound.commands.diagnose import keep_ceilings
    from membound.device.ceilings import Ceilings
    from support import tracebuilder

    c = tracebuilder.test_ceilings()
    path = keep_ceilings(tmp_path, c)
    assert path == tmp_path / "ceilings.json" and Ceilings.load(path) == c
    assert keep_ceilings(tmp_path, None) == path  # never overwritten
    # a later analyze of that folder uses them, and says so
    b = tracebuilder.planted_input_pipeline()
    b.device = c.name
    a = analyze([b.write(tmp_path / "trace.json.gz")])
    assert a.ceilings == c and a.ceilings_origin == "ceilings.json beside the trace"
    assert any("from ceilings.json beside the trace" in n for n in a.notes)


def test_no_warmup_leaks_no_profiler_warning_and_ctrl_c_is_no_crash(tmp_path, script, capsys):
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        code = main(["diagnose", "--wait", "0", "--warmup", "0", "--steps", "2", "--no-analyze",
                     "--out", str(tmp_path / "o"), "--", str(script), "6"])  # fmt: skip
    assert code == 0
    assert not [w for w in seen if "warmup" in str(w.message)]
    stop = tmp_path / "stop.py"
    stop.write_text(TRAIN + "\nraise KeyboardInterrupt\n")
    assert main(["diagnose", *FAST, "--no-analyze", "--out", str(tmp_path / "k"), "--",
                 str(stop), "8"]) == 130  # fmt: skip
    err = capsys.readouterr().err
    assert "was interrupted (Ctrl-C)" in err and "crashed" not in err


def test_pooled_rank_steps_say_whose_they_are(capsys):
    from support.paths import FIXTURES

    assert main(["analyze", str(FIXTURES / "h200x2_straggler"), "--format", "plain"]) == 0
    out = capsys.readouterr().out
    assert "r0 step" in out and "r1 step" in out
