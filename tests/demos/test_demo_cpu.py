"""`membound demo` without a GPU: CPU roofline + replay of the shipped H200 traces, end to end."""

from __future__ import annotations

import json
import struct

import pytest

from membound.cli import main
from membound.demos import RECORDED_PIPELINE, RECORDED_SCENARIOS, TRACES_DIR, recorded_trace
from membound.demos.layernorm import Row, story


def _png_size(path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def test_shipped_traces_are_small_and_present():
    files = list(TRACES_DIR.glob("*.json.gz"))
    names = {f.name for f in files}
    for name in RECORDED_SCENARIOS:
        assert f"{name}.json.gz" in names
    for name in RECORDED_PIPELINE:
        assert recorded_trace(f"input-{name}").exists()
    assert all(f.stat().st_size < 150_000 for f in files)
    assert sum(f.stat().st_size for f in files) < 1_000_000


def test_demo_cpu_end_to_end(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--device", "cpu", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    # says plainly what needs a GPU
    assert "No CUDA device here" in text
    assert "layernorm: needs a CUDA GPU" in text
    # pictures: the CPU roofline and one timeline per variant, real PNGs of a sensible size
    w, h = _png_size(out / "roofline-cpu.png")
    assert w > 400 and h > 300
    for name in RECORDED_PIPELINE:
        w, h = _png_size(out / "input-pipeline" / f"{name}.timeline.png")
        assert w > 300 and h > 100
    # the recorded input-pipeline story, as the analysis computes it from the traces
    rep = {
        n: json.loads((out / "input-pipeline" / f"{n}.json").read_text()) for n in RECORDED_PIPELINE
    }
    codes = {n: [f["code"] for f in r["findings"]] for n, r in rep.items()}
    assert codes["a-pageable"][0] == "pageable-copy"
    assert codes["b-dl-pinned"][0] == "input-starved"
    assert "pageable-copy" not in codes["c-prefetch"] + codes["d-prefetch-u8"]
    assert (
        rep["c-prefetch"]["steps"]["median_step_ms"]
        < 0.5 * rep["a-pageable"]["steps"]["median_step_ms"]
    )
    # the before/after comparison is shown
    assert "membound compare" in text and "findings resolved: pageable-copy" in text
    # planted scenarios: top findings and HTML reports
    for name in RECORDED_SCENARIOS:
        assert (out / "scenarios" / f"{name}.html").read_text().startswith("<!DOCTYPE html>")
    sc = {n: json.loads((out / "scenarios" / f"{n}.json").read_text()) for n in RECORDED_SCENARIOS}
    assert sc["pageable-copy"]["findings"][0]["code"] == "pageable-copy"
    assert sc["blocking-copy"]["findings"][0]["code"] == "blocking-copy"
    assert all(f["share_of_step"] < 0.1 for f in sc["healthy"]["findings"])


def test_demo_out_must_be_a_folder(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["demo", "--device", "cpu", "--out", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a file" in err[0]


def test_demo_rejects_unknown_demo(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["demo", "nope"])
    assert exc.value.code == 2


class _Ceil:
    def ridge(self, compute):
        return 164.0


def test_layernorm_story_uses_the_measured_numbers():
    E = 1000
    rows = [
        Row("LayerNorm", "fp32", "fp32", "1", 8 * E, 8 * E, ms=0.351),
        Row("LayerNorm, autocast(fp16)", "fp32", "fp16 asked", "1", 8 * E, 8 * E, ms=0.350),
        Row("LayerNorm", "bf16", "fp32", "1", 4 * E, 8 * E, ms=0.200),
        Row("add + dropout + LayerNorm", "bf16", "fp32", "3 (eager)", 15 * E, 11 * E, ms=0.61),
        Row(
            "add + dropout + LayerNorm",
            "bf16",
            "fp32",
            "1 (membound add_norm)",
            8 * E,
            11 * E,
            ms=0.25,
        ),
    ]
    (s1, b1, f1), (s2, b2, f2) = story(rows, _Ceil())
    assert "0.350 ms vs 0.351 ms" in s1
    assert "1.0 FLOP/byte" in b1 and "(164)" in b1
    assert "0.200 ms" in f1 and "1.75x" in f1
    assert "0.610 ms in 3 kernels" in s2
    assert "0.250 ms" in f2 and "2.44x" in f2


def test_layernorm_story_without_the_fused_kernel():
    rows = [
        Row("add + dropout + LayerNorm", "bf16", "fp32", "3 (eager)", 15, 11, ms=0.61),
        Row("add + dropout + LayerNorm", "bf16", "fp32", "1 (membound add_norm)", 8, 11,
            error="fused kernel not available here: ImportError: x"),
    ]  # fmt: skip
    ((_, _, fix),) = story(rows, _Ceil())
    assert "not measured here" in fix and "ImportError" in fix


def test_chart_points_merge_equal_variants():
    from membound.demos.layernorm import chart_points

    rows = [
        Row("LayerNorm", "fp32", "fp32", "1", 800, 800, ms=0.351),
        Row("LayerNorm, autocast(fp16)", "fp32", "fp16 asked", "1", 800, 800, ms=0.349),
        Row("LayerNorm", "bf16", "fp32", "1", 400, 800, ms=0.200),
        Row("add + dropout + LayerNorm", "bf16", "fp32", "3 (eager)", 1500, 1100, ms=None),
    ]
    pts = chart_points(rows)
    assert [p["label"] for p in pts] == ["LN fp32 | LN fp32 + autocast(fp16)", "LN bf16"]
    assert pts[1]["intensity"] == 2.0 and pts[1]["achieved_flops"] == 800 / 0.2e-3
