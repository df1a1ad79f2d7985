"""Recompress a fixture folder's ops pass from gzip to xz and name it so in its meta.

membound's capture writes `trace.ops.json.gz`; the fixtures keep their ops passes as
`trace.ops.json.xz` (a third smaller: the working tree the device machine takes is capped at
64 MiB, tests/fixtures/README.md). The trace text is unchanged, so every figure a test reads
from it is the same.

    python benchmarks/fixture_xz.py tests/fixtures/h200_real_dcgan_oos1 [more folders]
"""

from __future__ import annotations

import argparse
import gzip
import json
import lzma
import sys
from pathlib import Path

GZ, XZ = "trace.ops.json.gz", "trace.ops.json.xz"


def convert(folder: Path) -> str:
    """Write `XZ` from `GZ` (which is removed) and point the meta's `ops_trace` at it; one
    line saying what was done."""
    src, meta = folder / GZ, folder / "capture.json"
    if not src.is_file():
        return f"{folder}: no {GZ}, nothing to do"
    raw = gzip.decompress(src.read_bytes())
    (folder / XZ).write_bytes(lzma.compress(raw, preset=9))
    if meta.is_file():
        text = meta.read_text()
        if json.loads(text).get("ops_trace") == GZ:
            meta.write_text(text.replace(f'"{GZ}"', f'"{XZ}"', 1))
    before = src.stat().st_size
    src.unlink()
    after = (folder / XZ).stat().st_size
    return f"{folder}: {before / 1e6:.2f} MB gzip -> {after / 1e6:.2f} MB xz"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folders", nargs="+", type=Path, help="fixture folders")
    a = p.parse_args(argv)
    missing = [f for f in a.folders if not f.is_dir()]
    if missing:
        p.error(f"not a folder: {missing[0]}")
    for folder in a.folders:
        print(convert(folder))
    return 0


if __name__ == "__main__":
    sys.exit(main())
