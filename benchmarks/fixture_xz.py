"""Recompress a fixture folder's traces from gzip to xz and name them so in its meta.

membound's capture writes `trace.json.gz` (the timeline) and `trace.ops.json.gz` (the ops
pass); the fixtures keep both as `.json.xz` (a third smaller: the working tree the device
machine takes is capped at 64 MiB, tests/fixtures/README.md). The analysis finds the meta
beside a recompressed timeline too (`trace.capture_meta.read_meta`). The trace text is
unchanged, so every figure a test reads from it is the same.

    python benchmarks/fixture_xz.py tests/fixtures/h200_real_dcgan_oos1 [more folders]
"""

from __future__ import annotations

import argparse
import gzip
import json
import lzma
import sys
from pathlib import Path

#: (gzip name, xz name, the meta key that names the file)
FILES = (
    ("trace.ops.json.gz", "trace.ops.json.xz", "ops_trace"),
    ("trace.json.gz", "trace.json.xz", "trace"),
)


def convert(folder: Path) -> str:
    """Write each `FILES` xz from its gzip (which is removed) and point the meta's key at it;
    one line saying what was done."""
    meta = folder / "capture.json"
    done = []
    for gz, xz, key in FILES:
        src = folder / gz
        if not src.is_file():
            continue
        raw = gzip.decompress(src.read_bytes())
        (folder / xz).write_bytes(lzma.compress(raw, preset=9))
        if meta.is_file():
            text = meta.read_text()
            doc = json.loads(text)
            if doc.get(key) == gz:  # the same text, one name changed (else rewritten)
                named = text.replace(f'"{key}": "{gz}"', f'"{key}": "{xz}"', 1)
                meta.write_text(named if named != text else json.dumps({**doc, key: xz}, indent=1))
        before = src.stat().st_size
        src.unlink()
        done.append(
            f"{gz} {before / 1e6:.2f} MB -> {xz} {(folder / xz).stat().st_size / 1e6:.2f} MB"
        )
    return f"{folder}: " + ("; ".join(done) if done else "no gzip trace, nothing to do")


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
