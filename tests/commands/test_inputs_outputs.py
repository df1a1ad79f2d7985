"""Issue 17, paths: every output path is checked before any work, with one line and exit 2;
several inputs get one output each; folders skip what is not a trace; nothing blocks on a
FIFO or fails with a traceback on a folder it cannot list."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest

import membound.analysis
from membound.cli import main
from membound.errors import BadInput
from membound.outputs import output_dir, output_file, per_input, unique_labels
from membound.trace.capture_meta import timeline_in
from support.paths import FIXTURES

PIPELINE = timeline_in(FIXTURES / "synthetic_input_pipeline")
LAUNCH = timeline_in(FIXTURES / "synthetic_launch_bound")
ROOT = os.geteuid() == 0 if hasattr(os, "geteuid") else False


def _one_line_error(capsys, *words: str) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err and "error:" in err
    for w in words:
        assert w in err, err
    return err


# ---- the shared checks ------------------------------------------------------------------
@pytest.fixture
def places(tmp_path):
    """Where no report can go: a path under a regular file, in /proc, a folder, a folder
    that does not exist, and (not as root, who writes anywhere) a read-only folder."""
    afile = tmp_path / "afile.txt"
    afile.write_text("x")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    yield {
        "under-a-file": (afile / "r.json", "is a file, not a folder"),
        "proc": (Path("/proc/r.json"), "pseudo-filesystem"),
        "proc-file": (Path("/proc/self/status"), "pseudo-filesystem"),
        "folder": (tmp_path, "is a folder"),
        "no-parent": (tmp_path / "nope" / "r.json", "does not exist"),
        "read-only": (ro / "r.json", "cannot write in the folder"),
    }
    ro.chmod(0o700)


BAD = ["under-a-file", "proc", "proc-file", "folder", "no-parent", "read-only"]


def _case(places, name):
    if name == "read-only" and ROOT:
        pytest.skip("root writes into a read-only folder; /proc and a file cover it")
    return places[name]


@pytest.mark.parametrize("name", BAD)
def test_output_file_refuses_with_one_sentence(places, name):
    path, words = _case(places, name)
    with pytest.raises(BadInput, match=words) as exc:
        output_file(str(path), "--json")
    assert "\n" not in str(exc.value) and str(exc.value).startswith(f"--json {path}")


def test_output_file_accepts_new_existing_and_devices(tmp_path):
    assert output_file(str(tmp_path / "r.json"), "--json") == tmp_path / "r.json"
    (tmp_path / "old.json").write_text("kept until written")
    assert output_file(str(tmp_path / "old.json"), "--json") == tmp_path / "old.json"
    assert (tmp_path / "old.json").read_text() == "kept until written"  # not truncated
    assert output_file("/dev/null", "--json") == Path("/dev/null")
    assert output_file(str(tmp_path), "--annotate", folder_ok=True) == tmp_path
    assert output_file(None, "--json") is None
    assert not list(tmp_path.glob(".membound-probe-*"))  # the probe leaves nothing


def test_relative_output_is_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert output_file("r.json", "--json") == tmp_path / "r.json"


def test_output_dir_creates_folders_and_refuses_files(tmp_path):
    assert output_dir(str(tmp_path / "a" / "b"), "--out").is_dir()
    (tmp_path / "f").write_text("x")
    for bad in (tmp_path / "f", tmp_path / "f" / "sub", Path("/proc/membound-out")):
        with pytest.raises(BadInput, match="not a folder|pseudo-filesystem"):
            output_dir(str(bad), "--out")


def test_unique_labels_tell_same_named_traces_apart():
    assert unique_labels(["a/trace.json.gz", "b/trace.json.gz"]) == ["a-trace", "b-trace"]
    assert unique_labels(["x/a.json", "x/b.json.gz"]) == ["a", "b"]
    assert unique_labels(["r/a/t.json", "s/a/t.json"]) == ["r-a-t", "s-a-t"]
    assert unique_labels(["a.json", "a.json"]) == ["a", "a-2"]
    assert per_input(Path("/o/two.json"), "a-trace", ".json") == Path("/o/two.a-trace.json")
    assert per_input(Path("/o/a.json.gz"), "t", ".json.gz") == Path("/o/a.t.json.gz")


# ---- each verb checks before it works ---------------------------------------------------
@pytest.fixture
def no_analysis(monkeypatch):
    def analyze(*a, **k):
        raise AssertionError("the analysis ran before the output paths were checked")

    monkeypatch.setattr(membound.analysis, "analyze", analyze)


@pytest.mark.parametrize("flag", ["--json", "--html", "--annotate"])
@pytest.mark.parametrize("name", BAD)
def test_analyze_checks_outputs_first(places, name, flag, no_analysis, capsys):
    if flag == "--annotate" and name == "folder":
        pytest.skip("--annotate takes a folder (F|DIR)")
    path, words = _case(places, name)
    assert main(["analyze", str(PIPELINE), flag, str(path)]) == 2
    _one_line_error(capsys, flag, words)
    assert not (path.parent / "nope").exists()


def test_analyze_json_never_creates_its_folder(tmp_path, capsys):
    target = tmp_path / "nonexistent" / "x.json"
    assert main(["analyze", str(PIPELINE), "--json", str(target)]) == 2
    assert not target.parent.exists()
    _one_line_error(capsys, "does not exist")


@pytest.mark.parametrize("name", ["under-a-file", "proc", "folder", "no-parent", "read-only"])
def test_compare_checks_json_before_reading_reports(places, name, capsys):
    path, words = _case(places, name)
    assert main(["compare", "missing-a.json", "missing-b.json", "--json", str(path)]) == 2
    _one_line_error(capsys, "--json", words)


@pytest.mark.parametrize("flag, name", [("--json", "proc"), ("--json", "under-a-file"),
                                        ("--json", "folder"), ("--plot", "proc"),
                                        ("--plot", "under-a-file")])  # fmt: skip
def test_roofline_checks_outputs_before_measuring(places, flag, name, monkeypatch, capsys):
    import membound.device

    def measure(*a, **k):
        raise AssertionError("measured before the output paths were checked")

    monkeypatch.setattr(membound.device, "get_ceilings", measure)
    path, words = _case(places, name)
    if flag == "--plot" and path.suffix != ".png":
        path = path.with_suffix(".png") if path.name != "status" else path
    assert main(["roofline", "--device", "cpu", "--quick", flag, str(path)]) == 2
    _one_line_error(capsys, flag)


def test_demo_out_under_a_file_is_one_line(places, capsys):
    path, _ = places["under-a-file"]
    assert main(["demo", "layernorm", "--out", str(path)]) == 2
    _one_line_error(capsys, "--out", "not a folder")


# ---- several traces, several outputs -----------------------------------------------------
@pytest.fixture
def two_runs(tmp_path):
    """The layout two `diagnose` runs leave: the same file name in two folders."""
    out = []
    for name, src in (("a", PIPELINE), ("b", LAUNCH)):
        (tmp_path / name).mkdir()
        out.append(tmp_path / name / "trace.json.gz")
        shutil.copy(src, out[-1])
    return out


def test_two_traces_two_reports_named_after_their_inputs(tmp_path, two_runs, capsys):
    rc = main(["analyze", *map(str, two_runs), "--json", str(tmp_path / "two.json"),
               "--html", str(tmp_path / "two.html"), "--annotate", str(tmp_path), "--quiet"])  # fmt: skip
    assert rc == 0
    a, b = tmp_path / "two.a-trace.json", tmp_path / "two.b-trace.json"
    assert json.loads(a.read_text())["trace"] == str(two_runs[0])
    assert json.loads(b.read_text())["trace"] == str(two_runs[1])
    assert (tmp_path / "two.a-trace.html").exists() and (tmp_path / "two.b-trace.html").exists()
    assert (tmp_path / "a-trace.membound.json.gz").exists()
    assert (tmp_path / "b-trace.membound.json.gz").exists()
    captured = capsys.readouterr()
    assert captured.out == ""  # --quiet: where each file went is said on stderr
    for path in (a, b, tmp_path / "two.a-trace.html", tmp_path / "b-trace.membound.json.gz"):
        assert "wrote " in captured.err and str(path) in captured.err


def test_one_trace_keeps_the_given_name(tmp_path, capsys):
    assert main(["analyze", str(PIPELINE), "--json", str(tmp_path / "r.json"), "--quiet"]) == 0
    assert (tmp_path / "r.json").exists() and f"wrote json: {tmp_path / 'r.json'}" in (
        capsys.readouterr().err
    )


def test_the_same_trace_twice_is_analysed_once(tmp_path, capsys):
    rc = main(["analyze", str(PIPELINE), str(PIPELINE), "--json", str(tmp_path / "r.json"),
               "--quiet"])  # fmt: skip
    assert rc == 0
    assert (tmp_path / "r.json").exists()
    assert "given twice" in capsys.readouterr().err


# ---- folders and files that are not traces ----------------------------------------------
def test_the_packaged_demo_traces_folder_is_analysed(tmp_path, capsys):
    """It holds h200-ceilings.json beside its traces: skipped, with a note."""
    folder = Path(membound.__file__).parent / "demos" / "traces"
    assert (folder / "h200-ceilings.json").exists()
    sub = tmp_path / "traces"
    shutil.copytree(folder, sub)
    (sub / "x.json").mkdir()  # a folder named like a trace: not one
    rc = main(["analyze", str(sub), "--json", str(tmp_path / "r.json"), "--quiet"])
    assert rc == 0
    err = capsys.readouterr().err
    assert "h200-ceilings.json is not a trace" in err and "x.json" not in err
    written = sorted(p.name for p in tmp_path.glob("r.*.json"))
    assert written == sorted(f"r.{p.name.split('.json')[0]}.json" for p in sub.glob("*.json.gz"))


def _unblock_after(fifo: Path, seconds: float):
    """If a reader blocks on `fifo`, open it for writing after `seconds`, so a regression
    fails the test instead of hanging the suite."""
    blocked = []

    def unblock():
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # succeeds only if a reader waits
        except OSError:
            return
        blocked.append(True)
        os.close(fd)

    timer = threading.Timer(seconds, unblock)
    timer.start()
    return timer, blocked


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize("in_folder", [False, True])
def test_a_fifo_among_inputs_is_skipped_not_waited_on(tmp_path, two_runs, capsys, in_folder):
    folder = two_runs[0].parent
    fifo = folder / "pipe.json"
    os.mkfifo(fifo)
    timer, blocked = _unblock_after(fifo, 20)
    try:
        inputs = [str(folder)] if in_folder else [str(two_runs[0]), str(fifo), str(two_runs[1])]
        rc = main(["analyze", *inputs, "--quiet", "--json", str(tmp_path / "r.json")])
    finally:
        timer.cancel()
    assert not blocked, "a reader blocked on the FIFO"
    assert rc == 0
    assert "pipe.json is a FIFO, not a trace file: skipped" in capsys.readouterr().err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_reading_a_fifo_fails_at_once(tmp_path):
    from membound.analysis.ranks import is_rank_set
    from membound.trace.distributed import read_distributed_info
    from membound.trace.files import open_trace

    fifo = tmp_path / "trace.rank0.json"
    os.mkfifo(fifo)
    timer, blocked = _unblock_after(fifo, 20)
    try:
        assert read_distributed_info(fifo) is None
        assert not is_rank_set([fifo, PIPELINE])
        with pytest.raises(OSError, match="not a regular file"):
            open_trace(fifo)
    finally:
        timer.cancel()
    assert not blocked


def test_a_folder_that_cannot_be_listed_is_one_line(tmp_path, monkeypatch, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    real = Path.iterdir

    def iterdir(self):
        if self == locked:  # what a mode-000 folder gives a user who is not root
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    assert main(["analyze", str(locked)]) == 2
    _one_line_error(capsys, "cannot list the folder", "Permission denied")


@pytest.mark.skipif(ROOT, reason="root lists a mode-000 folder")
def test_a_mode_000_folder_is_one_line(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        assert main(["analyze", str(locked)]) == 2
    finally:
        locked.chmod(0o700)
    _one_line_error(capsys, "cannot list the folder")


def test_only_non_traces_is_one_line(tmp_path, capsys):
    (tmp_path / "config.json").write_text('{"lr": 0.1}')
    assert main(["analyze", str(tmp_path)]) == 2
    _one_line_error(capsys, "holds no .json, .json.gz or .json.xz trace")


# ---- diagnose: before the script runs ---------------------------------------------------
@pytest.mark.parametrize("flag", ["--json", "--html", "--annotate", "--out"])
@pytest.mark.parametrize("name", ["under-a-file", "proc", "folder", "no-parent", "read-only"])
def test_diagnose_checks_outputs_before_the_script_runs(tmp_path, places, flag, name, capsys):
    if name == "folder" and flag in ("--annotate", "--out"):
        pytest.skip("a folder is what --out takes, and --annotate may take one")
    if name == "no-parent" and flag == "--out":
        pytest.skip("--out is created with its parents")
    path, words = _case(places, name)
    ran = tmp_path / "ran"
    script = tmp_path / "s.py"
    script.write_text(f"open({str(ran)!r}, 'w').close()\n")
    out = [] if flag == "--out" else ["--out", str(tmp_path / "out")]
    assert main(["diagnose", *out, flag, str(path), "--", str(script)]) == 2
    _one_line_error(capsys, flag, "not a folder" if flag == "--out" and "file" in name else words)
    assert not ran.exists() and not (tmp_path / "out").exists()


def test_diagnose_json_in_a_missing_folder_creates_nothing(tmp_path, capsys):
    script = tmp_path / "s.py"
    script.write_text("pass\n")
    target = tmp_path / "nonexistent" / "x.json"
    assert main(["diagnose", "--json", str(target), "--", str(script)]) == 2
    assert not target.parent.exists()
    _one_line_error(capsys, "does not exist")


def test_diagnose_default_run_folder_in_a_read_only_place(tmp_path, monkeypatch, capsys):
    script = tmp_path / "s.py"
    script.write_text("pass\n")
    monkeypatch.chdir("/proc")  # nothing can be created here, not even by root
    assert main(["diagnose", "--", str(script)]) == 2
    _one_line_error(capsys, "membound-out")


def test_profile_report_checks_its_paths_before_analysing(tmp_path, monkeypatch):
    from membound.api import Profile

    def analyze(self, ceilings=None):
        raise AssertionError("analysed before the output paths were checked")

    monkeypatch.setattr(Profile, "analyze", analyze)
    p = membound.profile(out=tmp_path)
    with pytest.raises(BadInput, match="json_path /proc/r.json is inside /proc"):
        p.report(json_path="/proc/r.json")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(BadInput, match="is a file, not a folder"):
        p.report(html_path=tmp_path / "afile" / "r.html")


def test_diagnose_report_inside_a_new_out_folder(tmp_path, monkeypatch):
    """`--out O --json O/report.json`: --out is created first, so the report's folder exists
    (how benchmarks/bench_truth.py runs it); a bad --json leaves no --out folder behind."""
    from membound.commands import diagnose

    out = tmp_path / "new" / "out"
    from membound.cli import build_parser

    ns = build_parser().parse_args(["diagnose", "--out", str(out), "--json",
                                    str(out / "report.json"), "--", "s.py"])  # fmt: skip
    diagnose._resolve_paths(ns, None)
    assert out.is_dir() and ns.json == str(out / "report.json")
    bad = build_parser().parse_args(["diagnose", "--out", str(tmp_path / "o2" / "x"), "--json",
                                     "/proc/r.json", "--", "s.py"])  # fmt: skip
    with pytest.raises(BadInput):
        diagnose._resolve_paths(bad, None)
    assert not (tmp_path / "o2").exists()
