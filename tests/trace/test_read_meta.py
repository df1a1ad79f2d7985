"""trace.capture_meta.read_meta: the meta beside a trace membound's capture named, however the
trace was recompressed since."""

from __future__ import annotations

import json

from membound.trace.capture_meta import read_meta


def test_the_meta_is_found_beside_the_trace_recompressed_or_not(tmp_path):
    (tmp_path / "capture.json").write_text(json.dumps({"steps_captured": 4}))
    (tmp_path / "capture.rank2.json").write_text(json.dumps({"steps_captured": 2}))
    for name in ("trace.json.gz", "trace.json.xz", "trace.json"):
        assert read_meta(tmp_path / name) == {"steps_captured": 4}, name
    for name in ("trace.rank2.json.gz", "trace.rank2.json.xz"):
        assert read_meta(tmp_path / name) == {"steps_captured": 2}, name


def test_a_trace_membound_did_not_name_has_no_meta(tmp_path):
    (tmp_path / "capture.json").write_text(json.dumps({"steps_captured": 4}))
    for name in ("mine.json.gz", "trace.json.bz2", "trace.ops.json.xz", "trace.json.gz.xz"):
        assert read_meta(tmp_path / name) is None, name


def test_the_timeline_in_a_folder_is_found_however_it_is_stored(tmp_path):
    from membound.trace.capture_meta import timeline_in

    assert timeline_in(tmp_path) == tmp_path / "trace.json.gz"  # none yet: as written
    (tmp_path / "trace.json.xz").write_bytes(b"")
    assert timeline_in(tmp_path) == tmp_path / "trace.json.xz"
    (tmp_path / "trace.json.gz").write_bytes(b"")
    assert timeline_in(tmp_path) == tmp_path / "trace.json.gz"  # as written first
    (tmp_path / "trace.rank1.json.xz").write_bytes(b"")
    assert timeline_in(tmp_path, rank=1) == tmp_path / "trace.rank1.json.xz"
