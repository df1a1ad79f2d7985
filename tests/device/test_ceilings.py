"""`Ceilings.load`: the three files that hold ceilings, and one line for any other file."""

from __future__ import annotations

import json

import pytest

from membound.device.ceilings import Ceilings
from membound.errors import BadInput
from support import tracebuilder


@pytest.mark.parametrize(
    "wrap",
    [
        lambda d: d,  # Ceilings.to_dict()
        lambda d: {"ceilings": d, "transfers": []},  # membound roofline --json
        lambda d: {"schema": 1, "device": {"name": "x", "ceilings": d}},  # a report JSON
    ],
)
def test_load_reads_every_layout_that_holds_ceilings(tmp_path, wrap):
    c = tracebuilder.test_ceilings()
    path = tmp_path / "c.json"
    path.write_text(json.dumps(wrap(c.to_dict())))
    assert Ceilings.load(path) == c


@pytest.mark.parametrize("text", ["{", "[1, 2]", '{"device": {"ceilings": {"x": 1}}}'])
def test_load_refuses_other_files_in_one_sentence(tmp_path, text):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(BadInput) as err:
        Ceilings.load(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(BadInput, match="cannot read ceilings"):
        Ceilings.load(tmp_path / "missing.json")
