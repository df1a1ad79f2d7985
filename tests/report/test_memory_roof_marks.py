"""Issue 16 in the reports: the op tables mark a bandwidth fraction of a roof other than
HBM's (L2, write, mixed) and say what the marks mean; the ceilings table shows the write and
L2 figures when measured and the matmul sweep per operand layout."""

from __future__ import annotations

import dataclasses

from rich.console import Console

from membound.analysis import analyze
from membound.demos import recorded_ceilings
from membound.device.ceilings import Ceilings
from membound.report.ceilings import ROOF_LEGEND, render, roof_mark, sweep_rows, sweep_table
from membound.trace.capture_meta import timeline_in
from support.paths import FIXTURES

TRACE = timeline_in(FIXTURES / "h200_pageable_copy")
#: test values, not measurements (`tests/analysis/test_roofline_memory_roof.py`)
TEST_L2 = {"l2_bandwidth": 8e12, "l2_bytes": 60 << 20}


def _analysis(**figures):
    return analyze(TRACE, dataclasses.replace(recorded_ceilings(), **figures))


def _line(text: str, op: str) -> str:
    return next(x for x in text.splitlines() if op in x)


def test_marks():
    assert [roof_mark(r) for r in ("dram", None, "l2", "l2-reads", "write", "mixed")] == [
        "", "", " L2", " L2r", " W", " mix",
    ]  # fmt: skip


def test_terminal_table_marks_the_l2_roof_and_says_what_it_means():
    from membound.report.terminal import render as render_report

    def text(a, terminal=True):
        console = Console(record=True, width=220, force_terminal=terminal, color_system=None)
        render_report(a, console)
        return console.export_text()

    plain = text(_analysis())
    assert "L2" not in _line(plain, "│ aten::clamp_min") and ROOF_LEGEND[:30] not in plain
    assert ">100%" in _line(plain, "│ aten::clamp_min")  # the issue: above the HBM roof
    with_l2 = text(_analysis(**TEST_L2))
    clamp = _line(with_l2, "│ aten::clamp_min")
    assert " L2" in clamp and ">100%" not in clamp
    assert " mix" in _line(with_l2, "│ aten::threshold_backward")  # 36 MB and 74 MB calls
    assert "of BW: of the HBM copy rate" in " ".join(with_l2.split())
    # a pipe gets the list: the roof is named after the fraction of it
    listed = text(_analysis(**TEST_L2), terminal=False).splitlines()
    i = listed.index("  aten::clamp_min")
    assert listed[i + 1].endswith("of roof (L2)")


def test_html_table_marks_the_l2_roof():
    from membound.report import html

    page = html.render(_analysis(**TEST_L2))
    clamp = page[page.index("aten::clamp_min</td>") :].split("</tr>")[0]
    assert " L2</td>" in clamp and "&gt;100%" not in clamp
    assert "of BW: of the HBM copy rate" in page
    assert "of BW: of the HBM copy rate" not in html.render(_analysis())


def test_roofline_measure_table_marks_the_roof():
    from membound.roofline import table_from_trace
    from membound.trace.load import load_trace

    t = table_from_trace(load_trace(TRACE), dataclasses.replace(recorded_ceilings(), **TEST_L2),
                         "cuda", False)  # fmt: skip
    console = Console(record=True, width=220)
    console.print(t)
    text = console.export_text()
    assert " L2" in _line(text, "aten::clamp_min")
    assert "marked L2" in " ".join(text.split())


def _ceilings(**kw) -> Ceilings:
    return Ceilings(device="cuda", name="NVIDIA H200", memory_bandwidth=4.2e12,
                    read_bandwidth=4.1e12, flops={"bf16": 7e14},
                    datasheet={"memory_bandwidth": 4.8e12, "bf16": 9.89e14}, **kw)  # fmt: skip


def _text(c) -> str:
    console = Console(record=True, width=200)
    render(c, console)
    return console.export_text()


def test_ceilings_table_shows_write_and_l2_rows_when_measured():
    text = _text(_ceilings())
    assert "write (fill_)" not in text and "L2 bandwidth" not in text  # an old file: no rows
    c = _ceilings(write_bandwidth=4.6e12, l2_bandwidth=7.5e12, l2_bytes=60 << 20,
                  spread={"l2_bandwidth": [7.2e12, 7.8e12]})  # fmt: skip
    text = _text(c)
    write = _line(text, "write (fill_)")
    assert "4.6 TB/s" in write and "4.8 TB/s" in write and "96%" in write
    l2 = _line(text, "L2 bandwidth")
    assert "60 MiB" in l2 and "7.5 TB/s" in l2 and "-4% +4%" in l2


def test_sweep_table_per_layout_in_the_order_timed():
    rows = [
        {"m": 8192, "n": 8192, "k": 8192, "flops": 6.6e14, "layout": "A@B", "order": 0},
        {"m": 8192, "n": 8192, "k": 8192, "flops": 6.7e14, "layout": "A@B.T", "order": 1},
        {"m": 4096, "n": 4096, "k": 4096, "flops": 7.1e14, "layout": "A@B", "order": 2},
        {"m": 4096, "n": 4096, "k": 4096, "flops": 6.9e14, "layout": "A@B.T", "order": 3},
    ]  # a reverse-order sweep: the larger shape was timed first
    c = _ceilings(matmul_sweep={"bf16": rows})
    table = sweep_table(c)
    assert [(k, lay) for k, lay, _ in table] == [("bf16", "A@B"), ("bf16", "A@B.T")]
    assert list(table[0][2]) == [(8192, 8192, 8192), (4096, 4096, 4096)]  # order timed
    assert dict(sweep_rows(c))["bf16"] == {(8192, 8192, 8192): 6.7e14, (4096, 4096, 4096): 7.1e14}
    lines = _text(c).splitlines()
    header = next(x for x in lines if "8192x8192x8192" in x)
    assert header.index("8192x8192x8192") < header.index("4096x4096x4096")
    abt = next(x for x in lines if "A@B.T" in x and "matmul bf16" in x)
    assert "670 TFLOP/s" in abt and "690 TFLOP/s" in abt
    assert any("nn.Linear" in x for x in lines)
