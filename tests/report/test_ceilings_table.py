"""The ceilings table: measured vs datasheet with the fraction, and the copy rows."""

from __future__ import annotations

from rich.console import Console

from membound.device.ceilings import Ceilings, Transfer
from membound.report.ceilings import ceiling_rows, render


def _ceilings():
    return Ceilings(
        device="cuda",
        name="NVIDIA H200",
        memory_bandwidth=2.4e12,
        read_bandwidth=4.0e12,
        flops={"bf16": 7.5e14, "fp32": 5.1e13},
        transfers=[
            Transfer("h2d", "pageable", True, 256 << 20, 8.1e9, 0.998),
            Transfer("h2d", "pinned", True, 256 << 20, 55e9, 0.005),
        ],
        datasheet={"memory_bandwidth": 4.8e12, "bf16": 1.0e15, "fp32": 6.7e13},
        seconds=21.3,
        notes=["fp8: not supported"],
    )


def _text(c) -> str:
    console = Console(record=True, width=200)
    render(c, console)
    return console.export_text()


def test_fraction_of_datasheet():
    text = _text(_ceilings())
    line = next(x for x in text.splitlines() if "copy" in x and "memory" in x)
    assert "2.4 TB/s" in line and "4.8 TB/s" in line and "50%" in line
    bf16 = next(x for x in text.splitlines() if "matmul bf16" in x)
    assert "750 TFLOP/s" in bf16 and "75%" in bf16
    assert "took 21.3 s" in text
    assert "longest" not in text  # no step times (files written before): none named


def test_title_names_the_three_longest_steps():
    import dataclasses

    c = dataclasses.replace(
        _ceilings(), step_seconds={"copy": 6.2, "bf16": 9.75, "l2": 0.4, "fp32": 3.0, "read": 1.0}
    )
    flat = " ".join(_text(c).split())  # the title wraps at the table's width
    assert "took 21.3 s (bf16 9.8, copy 6.2, fp32 3.0 the longest)" in flat


def test_transfer_rows_show_host_blocked():
    lines = _text(_ceilings()).splitlines()
    pageable = next(x for x in lines if "pageable" in x)
    pinned = next(x for x in lines if "pinned" in x and "H2D" in x)
    assert "8.1" in pageable and "99.8%" in pageable
    assert "55.0" in pinned and "0.5%" in pinned


def test_without_datasheet_or_transfers():
    c = _ceilings()
    c.datasheet, c.transfers = None, []
    text = _text(c)
    assert "host blocked" not in text
    assert "not measured: fp8" in text
    assert [r[2] for r in ceiling_rows(c)] == [None] * 4


def test_interconnect_rows_when_measured():
    from membound.report.ceilings import interconnect_rows

    c = Ceilings(device="cuda", name="NVIDIA H200", memory_bandwidth=4.27e12)
    assert interconnect_rows(c) == []
    c.interconnect = {
        "peer_copy_bandwidth": 321e9,
        "allreduce_bus_bandwidth_by_size": {str(64 << 20): 256e9, str(16 << 20): 217e9},
    }
    rows = interconnect_rows(c)
    assert rows[0] == ("peer copy cuda:0 -> cuda:1", "-", 321e9)
    assert [r[1] for r in rows[1:]] == ["16 MiB", "64 MiB"]  # sorted by message size
    # files written before the sweep: one figure with its message size
    c.interconnect = {"allreduce_bus_bandwidth": 234e9, "allreduce_bytes": 32 << 20}
    assert interconnect_rows(c) == [("all-reduce (NCCL), bus", "32 MiB", 234e9)]
    text = _text(c)
    assert "GPU <-> GPU" in text and "234" in text and "32 MiB" in text


def test_repeated_runs_show_their_spread():
    """A figure measured over repeated runs shows how far its slow and fast runs lie from
    the median, in the ceilings table and in the copy table; none without spreads."""
    c = _ceilings()
    c.spread = {"memory_bandwidth": [1.2e12, 2.5e12], "flops.bf16": [7.5e14, 7.5e14]}
    c.transfers[0].bandwidth_spread = [4.05e9, 8.1e9]
    lines = _text(c).splitlines()
    copy = next(x for x in lines if "copy" in x and "memory" in x)
    assert "-50% +4%" in copy
    assert "+0% +0%" in next(x for x in lines if "matmul bf16" in x)
    assert "-50% +0%" in next(x for x in lines if "pageable" in x)
    assert "10th/90th percentile" in "\n".join(lines)
    plain = _text(_ceilings())
    assert "spread: the slow" not in plain and "spread" not in plain.splitlines()[1]


def test_a_refresh_shows_how_far_each_figure_moved():
    old = _ceilings()
    old.memory_bandwidth, old.measured_at = 1.2e12, "2026-11-30T10:00:00+00:00"
    lines = _text_with_previous(_ceilings(), old).splitlines()
    copy = next(x for x in lines if "copy" in x and "memory" in x)
    assert copy.rstrip(" │").endswith("+100%")
    assert "+0%" in next(x for x in lines if "matmul bf16" in x)
    assert any("2026-11-30T10:00:00" in x for x in lines)


def _text_with_previous(c, previous) -> str:
    console = Console(record=True, width=200)
    render(c, console, previous=previous)
    return console.export_text()


def test_matmul_sweep_table_per_shape():
    c = _ceilings()
    c.matmul_sweep = {
        "bf16": [{"m": 4096, "n": 4096, "k": 4096, "flops": 6.9e14},
                 {"m": 8192, "n": 8192, "k": 8192, "flops": 7.9e14}],
        "fp32": [{"m": 4096, "n": 4096, "k": 4096, "flops": 5.1e13}],
    }  # fmt: skip
    lines = _text(c).splitlines()
    assert any("matmul sweep" in x for x in lines)
    bf16 = [x for x in lines if "matmul bf16" in x][-1]  # the sweep's row, after the ceilings'
    assert "690 TFLOP/s" in bf16 and "790 TFLOP/s" in bf16
    fp32 = [x for x in lines if "matmul fp32" in x][-1]
    assert "51 TFLOP/s" in fp32 and "-" in fp32  # not timed at 8192³
    c.matmul_sweep = {"bf16": c.matmul_sweep["bf16"][:1]}
    assert "matmul sweep" not in _text(c)  # one shape per dtype: nothing to compare


def test_sweep_table_shows_each_clock_of_a_shape():
    """A shape timed sustained, in bursts by events and by its kernels' clock gets one row
    per timing: the layout's, its "burst" and its "kernel clock" row."""
    from membound.report.ceilings import sweep_rows, sweep_table

    c = _ceilings()
    c.matmul_sweep = {
        "bf16": [{"m": 4096, "n": 4096, "k": 4096, "flops": 6.9e14, "layout": "A@B",
                  "burst_flops": 7.9e14, "kernel_flops": 8.1e14}],
    }  # fmt: skip
    rows = {layout: rates for key, layout, rates in sweep_table(c)}
    shape = (4096, 4096, 4096)
    assert rows == {"A@B": {shape: 6.9e14}, "A@B burst": {shape: 7.9e14},
                    "A@B kernel clock": {shape: 8.1e14}}  # fmt: skip
    assert sweep_rows(c) == [("bf16", {shape: 8.1e14})]
