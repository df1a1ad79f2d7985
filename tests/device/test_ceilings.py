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


def test_h200_sweep_fixture_ceiling_is_its_best_shape():
    """The H200's measured ceilings (2026-12-01, `membound roofline --refresh`): every matmul
    ceiling is the best sustained rate of its shape sweep, the four issue-16 shapes were all
    run, and the bf16 roof (725 TFLOP/s, 4096^3) sits at 73% of the datasheet's 989."""
    from pathlib import Path

    from membound.device.ceilings import Ceilings
    from membound.report.ceilings import sweep_rows

    c = Ceilings.load(Path(__file__).parents[1] / "fixtures" / "h200_ceilings_sweep.json")
    rows = dict(sweep_rows(c))
    assert set(rows) >= {"fp32", "tf32", "fp16", "bf16", "fp8"}
    for key, rates in rows.items():
        assert set(rates) == {(4096, 4096, 4096), (8192, 8192, 8192), (16384, 16384, 4096),
                              (65536, 1024, 4096)}  # fmt: skip
        assert c.flops[key] == max(rates.values())
    assert 0.70 < c.flops["bf16"] / 989.4e12 < 0.76
    lo, hi = c.spread["flops.bf16"]
    assert lo < c.flops["bf16"] < hi


def _with_issue16_figures() -> Ceilings:
    c = tracebuilder.test_ceilings()
    c.write_bandwidth, c.l2_bandwidth, c.l2_bytes = 1.1e12, 3.0e12, 60 << 20
    c.spread.update({"write_bandwidth": [1.0e12, 1.2e12], "l2_bandwidth": [2.8e12, 3.1e12]})
    c.matmul_sweep = {
        "bf16": [
            {"m": 64, "n": 64, "k": 64, "flops": 1e12, "layout": "A@B", "order": 0},
            {"m": 64, "n": 64, "k": 64, "flops": 2e12, "layout": "A@B.T", "order": 1},
        ]
    }
    return c


def test_write_and_l2_figures_round_trip_through_json(tmp_path):
    from membound.report.json_report import write_ceilings

    c = _with_issue16_figures()
    assert Ceilings.from_dict(json.loads(json.dumps(c.to_dict()))) == c
    path = write_ceilings(c, tmp_path / "ceilings.json")  # `membound roofline --json`
    back = Ceilings.load(path)
    assert back == c
    assert (back.write_bandwidth, back.l2_bandwidth, back.l2_bytes) == (1.1e12, 3.0e12, 60 << 20)
    assert back.matmul_sweep["bf16"][1]["layout"] == "A@B.T"


def test_files_written_before_the_new_figures_load_without_them():
    """The H200 ceilings recorded before issue 16 have no write, L2 or layout fields: they load
    with None (the HBM roof is then every op's) and their sweep rows read as A@B."""
    from pathlib import Path

    from membound.report.ceilings import sweep_table

    fixtures = Path(__file__).parents[1] / "fixtures"
    for name in ("h200_ceilings.json", "h200_ceilings_sweep.json"):
        data = json.loads((fixtures / name).read_text())
        assert "l2_bandwidth" not in json.dumps(data)  # truly an old file
        c = Ceilings.load(fixtures / name)
        assert (c.write_bandwidth, c.l2_bandwidth, c.l2_bytes) == (None, None, None)
    assert {layout for _, layout, _ in sweep_table(c)} == {"A@B"}
    # a bare old to_dict() without the keys at all
    old = {k: v for k, v in _with_issue16_figures().to_dict().items()
           if k not in ("write_bandwidth", "l2_bandwidth", "l2_bytes")}  # fmt: skip
    c = Ceilings.from_dict(old)
    assert c.l2_bandwidth is None and c.write_bandwidth is None and c.l2_bytes is None
