"""Screenshots of the HTML report in headless Chromium, for the README and docs/img/.

    python docs/screenshots.py            # writes docs/img/report-pageable-copy.png, report-cpu-only.png

A GPU trace (the shipped H200 pageable-copy trace, with the H200 ceilings shipped beside it)
and a CPU-only trace (tests/fixtures/cpu_only) go through `membound analyze --html`; Chromium
renders each page at 1280 px wide and the image is cropped below the last content. Needs
`chromium` on PATH (Debian: apt-get install chromium).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
#: traces relative to the repository root (the report names them as given)
SHOTS = {
    "report-pageable-copy.png": Path("src/membound/demos/traces/pageable-copy.json.gz"),
    "report-cpu-only.png": Path("tests/fixtures/cpu_only/trace.json.gz"),
}
WIDTH, HEIGHT = 1280, 4000


def shoot(trace: Path, out: Path, work: Path) -> None:
    page = work / (out.stem + ".html")
    subprocess.run(
        [sys.executable, "-m", "membound", "analyze", str(trace), "--html", str(page), "--quiet"],
        check=True,
        cwd=ROOT,
    )
    raw = work / out.name
    browser = next(
        filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None
    )
    if browser is None:
        sys.exit("docs/screenshots.py: no chromium on PATH (apt-get install chromium)")
    subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={raw}", page.as_uri()],
        check=True,
        capture_output=True,
    )  # fmt: skip
    img = Image.open(raw).convert("RGB")
    ink = np.nonzero((np.asarray(img) < 250).any(axis=(1, 2)))[0]  # rows with anything drawn
    img.crop((0, 0, WIDTH, min(HEIGHT, int(ink.max()) + 40))).save(out, optimize=True)
    print(f"wrote {out.relative_to(ROOT)} ({img.width}x{min(HEIGHT, int(ink.max()) + 40)})")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for name, trace in SHOTS.items():
            shoot(trace, ROOT / "docs/img" / name, Path(tmp))


if __name__ == "__main__":
    main()
