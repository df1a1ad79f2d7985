"""Opening trace files: plain or gzipped, judged by their first bytes (not their name)."""

from __future__ import annotations

import errno
import gzip
import os
import stat
from pathlib import Path

#: bytes (decompressed) a reader's `sniff` sees of a file
HEAD_BYTES = 4096


def check_regular(path: Path) -> None:
    """OSError unless `path` is a regular file: opening a FIFO blocks until something
    writes to it (forever, for a trace reader), and a device never ends."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise OSError(errno.EINVAL, "not a regular file", str(path))


def is_gzip(path: Path) -> bool:
    check_regular(Path(path))
    with Path(path).open("rb") as f:
        return f.read(2) == b"\x1f\x8b"


def open_trace(path: Path):
    """The file as a binary stream, decompressed if it is gzip; OSError for anything but a
    regular file (a FIFO, a device, a folder)."""
    path = Path(path)
    return gzip.open(path, "rb") if is_gzip(path) else path.open("rb")


def head(path: Path, n: int = HEAD_BYTES) -> bytes:
    """Its first `n` bytes, decompressed."""
    with open_trace(path) as f:
        return f.read(n)
