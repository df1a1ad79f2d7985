"""Opening trace files: plain or gzipped, judged by their first bytes (not their name)."""

from __future__ import annotations

import gzip
from pathlib import Path

#: bytes (decompressed) a reader's `sniff` sees of a file
HEAD_BYTES = 4096


def is_gzip(path: Path) -> bool:
    with Path(path).open("rb") as f:
        return f.read(2) == b"\x1f\x8b"


def open_trace(path: Path):
    """The file as a binary stream, decompressed if it is gzip."""
    path = Path(path)
    return gzip.open(path, "rb") if is_gzip(path) else path.open("rb")


def head(path: Path, n: int = HEAD_BYTES) -> bytes:
    """Its first `n` bytes, decompressed."""
    with open_trace(path) as f:
        return f.read(n)
