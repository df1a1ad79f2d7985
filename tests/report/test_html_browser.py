"""The HTML report opened in a real browser: headless Chromium renders a report built from a
shipped H200 trace, and the screenshot must show the timeline and the roofline charts.

Chromium comes from Debian's `chromium` package (`.ci/run` installs it); without it the test
skips and says why.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

from membound.demos import recorded_ceilings, recorded_trace

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
WIDTH, HEIGHT = 1400, 2400
#: colours only these charts draw: the timeline's "busy" bars and the roofline's fp8 roof
#: (tab:purple), both from `report.html.CAUSE_COLOURS` / `report.roofline_chart`
BUSY_GREEN = (0x2C, 0xA0, 0x2C)
ROOF_PURPLE = (0x94, 0x67, 0xBD)


def _browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no headless Chromium here (apt-get install -y chromium; .ci/run installs it)")


def _rows_with(img: np.ndarray, rgb: tuple[int, int, int], tol: int = 12) -> np.ndarray:
    """Indices of pixel rows holding at least 20 pixels of colour `rgb` (a chart's bar or
    line, not the summary box's 4-pixel green border)."""
    near = np.all(np.abs(img[:, :, :3].astype(int) - np.array(rgb)) <= tol, axis=2)
    return np.nonzero(near.sum(axis=1) >= 20)[0]


@pytest.fixture(scope="module")
def screenshot(tmp_path_factory):
    from membound.analysis import analyze
    from membound.report import html

    browser = _browser()
    d = tmp_path_factory.mktemp("browser")
    analysis = analyze(recorded_trace("pageable-copy"), recorded_ceilings())
    page = html.write(analysis, d / "report.html")
    png = d / "shot.png"
    cmd = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={d / 'profile'}", f"--screenshot={png}",
        f"--window-size={WIDTH},{HEIGHT}", page.as_uri(),
    ]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("headless Chromium did not finish a screenshot within 120 s")
    if not png.exists():
        # the browser itself could not start here (sandbox, shared memory, missing libraries):
        # an environment problem, not the report's; any page renders to *some* screenshot
        pytest.skip(
            f"headless Chromium wrote no screenshot (rc={proc.returncode}): "
            f"{proc.stderr.strip()[-300:]}"
        )
    return page, png


def test_report_needs_no_network(screenshot):
    page, _ = screenshot
    text = page.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
    assert "<svg" in text


def test_screenshot_shows_both_charts(screenshot):
    from matplotlib import image

    _, png = screenshot
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = image.imread(str(png))
    if img.dtype != np.uint8:
        img = (img * 255).round().astype(np.uint8)
    assert img.shape[0] == HEIGHT and img.shape[1] == WIDTH
    # the page is not blank: text, tables and charts cover a real share of it
    non_white = np.any(img[:, :, :3] < 235, axis=2)
    assert non_white.mean() > 0.03
    timeline = _rows_with(img, BUSY_GREEN)
    roofline = _rows_with(img, ROOF_PURPLE)
    assert len(timeline) > 40, "the timeline chart's busy bars are not on screen"
    assert len(roofline) > 0, "the roofline chart's roofs are not on screen"
    # in the report's order: timeline above roofline
    assert timeline.min() < roofline.min()
    # the roofline chart draws real content around its roofs (axes, lines, points), not an
    # empty box: the band of rows from its top roof down holds plenty of non-white pixels
    band = non_white[roofline.min() : roofline.min() + 400]
    assert band.mean() > 0.02
