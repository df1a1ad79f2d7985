"""benchmarks/fixture_xz.py: a fixture's ops pass recompressed to xz, named so in its meta."""

from __future__ import annotations

import gzip
import json
import lzma

import pytest

from membound.trace.load import load_trace
from support import tracebuilder
from support.paths import benchmark


@pytest.fixture(scope="module")
def fx():
    return benchmark("fixture_xz")


def test_the_ops_pass_is_the_same_text_and_the_meta_names_it(fx, tmp_path):
    text = tracebuilder.planted_input_pipeline().text().encode()
    (tmp_path / "trace.ops.json.gz").write_bytes(gzip.compress(text))
    meta = {"trace": "trace.json.gz", "ops_trace": "trace.ops.json.gz", "steps": 4}
    (tmp_path / "capture.json").write_text(json.dumps(meta, indent=1))
    assert fx.main([str(tmp_path)]) == 0
    assert not (tmp_path / "trace.ops.json.gz").exists()
    xz = tmp_path / "trace.ops.json.xz"
    assert lzma.decompress(xz.read_bytes()) == text
    assert json.loads((tmp_path / "capture.json").read_text()) == {
        **meta, "ops_trace": "trace.ops.json.xz"
    }  # fmt: skip
    assert len(load_trace(xz).gpu) == 6
    assert "nothing to do" in fx.convert(tmp_path)  # a second run changes nothing


def test_the_timeline_too_and_its_meta_is_still_found(fx, tmp_path):
    """The timeline `trace.json.gz` becomes `trace.json.xz`, the meta's `trace` names it,
    and the meta is read beside the xz (the step timer, the ops pass) as beside the gzip."""
    from membound.trace.capture_meta import read_meta

    text = tracebuilder.planted_input_pipeline().text().encode()
    (tmp_path / "trace.json.gz").write_bytes(gzip.compress(text))
    (tmp_path / "trace.ops.json.gz").write_bytes(gzip.compress(text))
    meta = {"trace": "trace.json.gz", "ops_trace": "trace.ops.json.gz"}
    (tmp_path / "capture.json").write_text(json.dumps(meta))  # compact: rewritten
    line = fx.convert(tmp_path)
    assert "trace.json.gz" in line and "trace.ops.json.gz" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "capture.json", "trace.json.xz", "trace.ops.json.xz"
    ]  # fmt: skip
    assert lzma.decompress((tmp_path / "trace.json.xz").read_bytes()) == text
    got = read_meta(tmp_path / "trace.json.xz")
    assert got == {"trace": "trace.json.xz", "ops_trace": "trace.ops.json.xz"}


def test_a_missing_folder_exits_2(fx, tmp_path):
    with pytest.raises(SystemExit) as e:
        fx.main([str(tmp_path / "nope")])
    assert e.value.code == 2
