"""Load a trace file, whatever wrote it, into `trace.model.Trace`: a registry of readers,
each chosen by the file's content (its first bytes, decompressed), not its name.

Built in: kineto JSON (`trace.kineto`: what `torch.profiler` exports). Another format (an
Nsight Systems SQLite export, say) is one module with `sniff(head) -> bool` and
`read(path, progress) -> Trace` filling the same typed columns, and one `register_reader`.
"""

from __future__ import annotations

import gzip
import lzma
import os
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from membound.errors import BadInput
from membound.trace import kineto
from membound.trace.files import head
from membound.trace.model import Trace


@dataclass(frozen=True)
class Reader:
    """One trace format: whether a file's first bytes are it, and how to read it."""

    name: str
    sniff: Callable[[bytes], bool]
    read: Callable[[Path, Callable[[int, int], None] | None], Trace]


READERS: dict[str, Reader] = {"kineto": Reader("kineto", kineto.sniff, kineto.read)}


def register_reader(name: str, sniff, read, *, replace: bool = False) -> Reader:
    """Add a trace format; formats are tried in registration order. Names are unique."""
    if name in READERS and not replace:
        raise ValueError(f"a trace reader named {name!r} is already registered")
    READERS[name] = Reader(name, sniff, read)
    return READERS[name]


def load_trace(
    path: str | os.PathLike, progress: Callable[[int, int], None] | None = None
) -> Trace:
    """Load one trace file; `BadInput` with one sentence when it cannot be read.

    `progress(done, total)` is called as the file is read, in bytes of the file on disk
    (compressed bytes for .gz), so a caller can show a progress bar on big traces."""
    p = Path(path)
    if not p.is_file():
        raise BadInput(
            f"{p} does not exist or is not a file; pass a kineto trace (.json, .json.gz or "
            ".json.xz)."
        )
    try:
        first = head(p)
        for reader in READERS.values():
            if reader.sniff(first):
                return reader.read(p, progress)
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error, lzma.LZMAError) as exc:
        raise kineto.bad(p, f"cannot read it: {exc}") from None
    raise kineto.bad(p, "it is not JSON")
