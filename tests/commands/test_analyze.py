"""`membound analyze`: files and folders, report files, one-line errors with exit code 2."""

from __future__ import annotations

import json

import pytest

from membound.cli import main
from support.paths import FIXTURES as DATA

PIPELINE = DATA / "synthetic_input_pipeline" / "trace.json.gz"


def test_analyze_writes_json_html_and_annotation(tmp_path, capsys):
    rc = main(
        [
            "analyze",
            str(PIPELINE),
            "--json",
            str(tmp_path / "r.json"),
            "--html",
            str(tmp_path / "r.html"),
            "--annotate",
            str(tmp_path / "a.json.gz"),
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert "input-starved" in out and "computing 40%" in out
    d = json.loads((tmp_path / "r.json").read_text())
    assert d["findings"][0]["code"] == "input-starved"
    assert (tmp_path / "r.html").exists() and (tmp_path / "a.json.gz").exists()


def test_analyze_with_ceilings_file(tmp_path, capsys):

    from support import tracebuilder

    c = tmp_path / "c.json"
    c.write_text(json.dumps(tracebuilder.test_ceilings().to_dict()))
    rc = main(
        [
            "analyze",
            str(PIPELINE),
            "--ceilings",
            str(c),
            "--json",
            str(tmp_path / "r.json"),
            "--quiet",
        ]
    )
    assert rc == 0 and capsys.readouterr().out == ""
    d = json.loads((tmp_path / "r.json").read_text())
    assert d["device"]["ceilings_source"] == "measured"
    pc = next(f for f in d["findings"] if f["code"] == "pageable-copy")
    assert pc["time_lost_ms_per_step"] == pytest.approx(0.99)


def test_folder_argument_analyzes_each_trace(tmp_path):
    folder = tmp_path / "traces"
    folder.mkdir()
    for name in ("synthetic_input_pipeline", "synthetic_launch_bound"):
        (folder / f"{name}.json.gz").write_bytes((DATA / name / "trace.json.gz").read_bytes())
    rc = main(["analyze", str(folder), "--json", str(tmp_path / "r.json"), "--quiet"])
    assert rc == 0
    written = sorted(p.name for p in tmp_path.glob("r.*.json"))
    assert written == ["r.synthetic_input_pipeline.json", "r.synthetic_launch_bound.json"]


def test_a_diagnose_folder_reads_its_timeline_not_its_companion_traces(tmp_path):
    """The ops pass and the CUDA-graph captures are read with the timeline trace: a folder
    of one capture is one report, not three."""
    src = DATA / "synthetic_launch_bound" / "trace.json.gz"
    for name in ("trace.json.gz", "trace.ops.json.gz", "trace.capture0.json.gz"):
        (tmp_path / name).write_bytes(src.read_bytes())
    rc = main(["analyze", str(tmp_path), "--json", str(tmp_path / "r.json"), "--quiet"])
    assert rc == 0
    assert (tmp_path / "r.json").exists() and not list(tmp_path.glob("r.*.json"))


def test_cpu_only_and_no_steps_traces(capsys):
    assert main(["analyze", str(DATA / "cpu_only" / "trace.json.gz")]) == 0
    assert "CPU-only" in capsys.readouterr().out
    assert main(["analyze", str(DATA / "synthetic_no_steps" / "trace.json.gz")]) == 0
    assert "no step markers" in capsys.readouterr().out


@pytest.mark.parametrize(
    "content",
    [
        b"not json at all",
        b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur"',
        b"\x1f\x8b\x08\x00broken",
    ],
)
def test_bad_files_exit_2_with_one_line(tmp_path, capsys, content):
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    assert main(["analyze", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "membound analyze: error:" in err and "bad.json" in err


def test_missing_file_and_empty_folder_exit_2(tmp_path, capsys):
    assert main(["analyze", str(tmp_path / "nope.json")]) == 2
    assert main(["analyze", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "holds no .json" in err


def test_analyze_a_real_h200_trace_with_its_measured_ceilings(tmp_path):
    """The CLI on a trace recorded on an H200 with the ceilings measured there: the JSON
    report names launch overhead first (the planted launch-bound script)."""
    rc = main(
        [
            "analyze",
            str(DATA / "h200_launch_bound" / "trace.json.gz"),
            "--ceilings",
            str(DATA / "h200_ceilings.json"),
            "--json",
            str(tmp_path / "r.json"),
            "--quiet",
        ]
    )
    assert rc == 0
    report = json.loads((tmp_path / "r.json").read_text())
    top = report["findings"][0]
    assert top["code"] == "launch-bound"
    assert top["time_lost_ms_per_step"] == pytest.approx(5.907, rel=1e-3)
    assert "profiler" in top["evidence"]["note"]


def test_an_xz_trace_in_a_folder_is_analysed_as_its_gzip(tmp_path, capsys):
    """A `.json.xz` trace (kept so by some users, and by membound's fixtures for their ops
    passes) is found in a folder and gives the report its gzip gives."""
    import gzip
    import lzma

    (tmp_path / "t.json.xz").write_bytes(lzma.compress(gzip.decompress(PIPELINE.read_bytes())))
    assert main(["analyze", str(tmp_path), "--json", str(tmp_path / "xz.json"), "--quiet"]) == 0
    assert main(["analyze", str(PIPELINE), "--json", str(tmp_path / "gz.json"), "--quiet"]) == 0
    xz, gz = (json.loads((tmp_path / f"{k}.json").read_text()) for k in ("xz", "gz"))
    assert [f["code"] for f in xz["findings"]] == [f["code"] for f in gz["findings"]]
    assert xz["steps"] == gz["steps"] and xz["findings"]
