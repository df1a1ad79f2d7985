"""The roofline chart renders headless to valid PNG and SVG files, with points."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

import pytest

from membound.device.ceilings import Ceilings
from membound.errors import BadInput
from membound.report.roofline_chart import draw, svg_string

CEIL = Ceilings(
    device="cuda",
    name="NVIDIA H200",
    memory_bandwidth=4.2e12,
    flops={"fp32": 5.1e13, "tf32": 3.56e14, "bf16": 7.5e14, "fp32_vector": 6.0e13},
)
POINTS = [
    {"label": "layer_norm", "intensity": 1.0, "achieved_flops": 2.5e12, "size": 0.27},
    {"label": "mm", "intensity": 2000.0, "achieved_flops": 6.0e14, "size": 1.5},
]


def test_png_is_valid(tmp_path):
    path = tmp_path / "out" / "roof.png"
    fig = draw(CEIL, POINTS, path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0].startswith("memory 4.2 TB/s")
    assert any(lab.startswith("bf16 750 TFLOP/s") for lab in labels)
    assert len(labels) == 1 + len(CEIL.flops)  # one sloped roof + one flat roof per dtype


def test_svg_is_valid_and_labels_ridges_and_points(tmp_path):
    path = tmp_path / "roof.svg"
    draw(CEIL, POINTS, path, title="t")
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg")
    text = path.read_text()
    assert "layer_norm" in text and "ridge" in text
    assert "FLOP/byte" in text


def _label_boxes(ax, names):
    return {t.get_text(): t.get_window_extent() for t in ax.texts if t.get_text() in names}


def test_labels_of_coinciding_points_do_not_overprint():
    pts = [
        {"label": "LN bf16", "intensity": 2.0, "achieved_flops": 5.3e12},
        {"label": "fused", "intensity": 2.8, "achieved_flops": 5.4e12},  # 0.15 decade right
        {"label": "far", "intensity": 200.0, "achieved_flops": 5e14},
    ]
    ax = draw(CEIL, pts).axes[0]
    boxes = _label_boxes(ax, ("LN bf16", "fused", "far"))
    assert set(boxes) == {"LN bf16", "fused", "far"}
    assert not boxes["LN bf16"].overlaps(boxes["fused"])
    far = next(t for t in ax.texts if t.get_text() == "far")
    assert far.xyann[0] > 0 and far.xyann[1] == 0  # a lone point: right of it, centred


def test_a_crowded_chart_overprints_nothing():
    """Twenty ops in a cluster (a real eager trace's small elementwise ops) plus the ridge
    labels of near-equal roofs: no two labels overlap, none covers another point's marker
    or leaves the axes, and those that fit nowhere are counted on the chart."""
    import random

    rng = random.Random(7)
    ceil = Ceilings(
        device="cuda",
        name="NVIDIA H200",
        memory_bandwidth=4.8e12,
        flops={"fp16": 9.89e14, "bf16": 9.89e14, "tf32": 4.95e14, "fp32": 6.7e13},
    )
    pts = [
        {
            "label": f"aten::op_{i}_backward",
            "intensity": 0.1 * 10 ** rng.uniform(0, 1),
            "achieved_flops": 3e11 * 10 ** rng.uniform(0, 1),
            "size": rng.random(),
        }
        for i in range(20)
    ]
    fig = draw(ceil, pts)
    ax = fig.axes[0]
    names = {p["label"] for p in pts}
    texts = [t for t in ax.texts if t.get_text() in names or t.get_text().startswith("ridge")]
    boxes = [t.get_window_extent() for t in texts]
    for i, a in enumerate(boxes):
        assert all(not a.overlaps(b) for b in boxes[i + 1 :]), texts[i].get_text()
    frame = ax.get_window_extent()
    assert all(frame.contains(b.x0, b.y0) and frame.contains(b.x1, b.y1) for b in boxes)
    shown = sum(t.get_text() in names for t in texts)
    assert shown >= 5  # the cluster is crowded, not unlabelled
    note = [t.get_text() for t in ax.texts if "unlabelled" in t.get_text()]
    assert (shown < 20) == bool(note)
    if note:
        assert note[0].startswith(f"{20 - shown} crowded point")
    assert sum(t.get_text().startswith("ridge") for t in texts) == 4  # fp16 and bf16 both


def test_roofs_meet_at_the_ridge():
    fig = draw(CEIL)
    ax = fig.axes[0]
    memory = ax.get_lines()[0]
    xs, ys = memory.get_data()
    assert ys[-1] / xs[-1] == pytest.approx(4.2e12)
    assert xs[-1] == pytest.approx(7.5e14 / 4.2e12)  # memory roof ends at the highest ridge


def test_svg_string_and_external_axes():
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.add_subplot()
    assert draw(CEIL, POINTS, ax=ax) is fig
    s = svg_string(fig)
    assert s.lstrip().startswith("<?xml") and "</svg>" in s


def test_invalid_points_are_skipped():
    fig = draw(
        CEIL,
        [
            {"label": "x", "intensity": 0, "achieved_flops": 1e12},
            {"label": "y", "intensity": None, "achieved_flops": 1},
        ],
    )
    assert not fig.axes[0].collections


def test_bad_suffix_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match=r"\.png or \.svg"):
        draw(CEIL, path=tmp_path / "roof.pdf")


def test_headless_without_pyplot_or_backend_switch():
    """Importing the module loads no matplotlib; drawing never touches pyplot's global state."""
    import subprocess

    code = (
        "import sys; import membound.report.roofline_chart as m; "
        "assert 'matplotlib' not in sys.modules; "
        "from membound.device.ceilings import Ceilings; "
        "m.draw(Ceilings(device='cpu', name='c', memory_bandwidth=1e10, flops={'fp32': 1e11})); "
        "assert 'matplotlib.pyplot' not in sys.modules"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
