"""Opening trace files: plain, gzipped or xz-compressed, judged by their first bytes (not
their name). kineto writes `.json` and `.json.gz`; `.json.xz` holds the same text about a third
smaller than gzip (membound's own test fixtures), and decompresses as fast."""

from __future__ import annotations

import errno
import gzip
import lzma
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


#: the first bytes of a gzip and of an xz stream
GZIP_MAGIC, XZ_MAGIC = b"\x1f\x8b", b"\xfd7zXZ\x00"


def compression(path: Path) -> str | None:
    """ "gzip", "xz", or None (plain) by the file's first bytes; OSError for anything but a
    regular file."""
    check_regular(Path(path))
    with Path(path).open("rb") as f:
        first = f.read(len(XZ_MAGIC))
    if first[:2] == GZIP_MAGIC:
        return "gzip"
    return "xz" if first == XZ_MAGIC else None


def is_gzip(path: Path) -> bool:
    return compression(path) == "gzip"


def is_compressed(path: Path) -> bool:
    """Gzip or xz: its size on disk says little about what it expands to."""
    return compression(path) is not None


def open_trace(path: Path):
    """The file as a binary stream, decompressed if it is gzip or xz; OSError for anything
    but a regular file (a FIFO, a device, a folder)."""
    path = Path(path)
    kind = compression(path)
    if kind == "gzip":
        return gzip.open(path, "rb")
    return lzma.open(path, "rb") if kind == "xz" else path.open("rb")


def head(path: Path, n: int = HEAD_BYTES) -> bytes:
    """Its first `n` bytes, decompressed."""
    with open_trace(path) as f:
        return f.read(n)
