"""A trace document's `traceEvents` array, split into runs of whole events in bounded memory,
whatever the layout: one event per line (kineto), one line for everything (`json.dump`),
any indentation, a bare top-level array.

The file is read in chunks. Each chunk is cut after its last top-level event, so the part
kept back (the next chunk's start) is at most one event, and the run before the cut is one
JSON text once wrapped in `[...]`. Two ways to find the cut:

- fast: the last `}` `,` `{` (any whitespace between) in the chunk. It may lie inside a
  string or a nested list of objects; then the wrapped run is not valid JSON (a strict prefix
  of a JSON value that ends inside a string or below the array's level never parses), so
  a parse failure means "cut wrongly" and the caller starts again exactly;
- exact (`scan`): a bracket- and string-aware scan, vectorised with NumPy over the chunk's
  structural bytes only. Used for chunks without a fast candidate (whitespace runs, a
  giant event), for the array's end, and for a whole file once a fast cut was wrong.

Nothing here recurses, so 10^5-deep nesting is only a long list of brackets. Whitespace
between events is dropped as it comes; an event larger than the limit is refused in one
line saying how to raise it (`MEMBOUND_MAX_EVENT_MB`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from membound._env import MAX_EVENT_MB_VAR, MAX_GZIP_RATIO_VAR

CHUNK = 16 << 20
HEAD_LIMIT = 64 << 20  # where "traceEvents" must start
TRAILER_LIMIT = 64 << 20  # what is kept of the document after the event array
DEFAULT_MAX_EVENT_MB = 64
DEFAULT_MAX_GZIP_RATIO = 100
#: a gzip stream may expand past `ratio` x its size only below this many bytes
GZIP_RATIO_FLOOR = 2 << 30

_FAST_CUT = re.compile(rb"\}\s*(,)\s*\{")
_TRACE_EVENTS = re.compile(rb'"traceEvents"\s*:\s*\[')
_FAST_WINDOW = 1 << 20  # look for a fast cut in the chunk's last MiB first
_SKIM_TAIL = 64 << 10  # and, skimming, in that window's last 64 KiB first

# byte classes for the exact scan
_QUOTE, _OPEN, _CLOSE, _COMMA, _BACKSLASH = 1, 2, 3, 4, 5
_LUT = np.zeros(256, np.uint8)
_LUT[ord('"')] = _QUOTE
_LUT[[ord("{"), ord("[")]] = _OPEN
_LUT[[ord("}"), ord("]")]] = _CLOSE
_LUT[ord(",")] = _COMMA
_LUT[ord("\\")] = _BACKSLASH
_SPACE = np.zeros(256, bool)
_SPACE[[9, 10, 13, 32]] = True


class StreamError(Exception):
    """The stream is not a JSON document holding an event array (the message says why)."""


class TooBig(StreamError):
    """A limit was passed: reading again would not help. The message is a predicate of
    the file ("expands to ...")."""


class WrongCut(Exception):
    """A fast cut turned out not to be between two events: read again with exact cuts."""


def next_cut(buf, pos: int, endpos: int) -> int:
    """Index of the comma of the first fast cut in `buf[pos:endpos]` (bytes, or a buffer
    such as a memoryview), -1 if none. Like every fast cut it may lie inside a string or a
    nested list: the run it ends then does not parse."""
    m = _FAST_CUT.search(buf, pos, endpos)
    return -1 if m is None else m.start(1)


def _env_number(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, "") or default)
    except ValueError:
        return default


@dataclass(frozen=True)
class Limits:
    """How much one event may hold, and how far a gzip stream may expand (0: no limit)."""

    max_event: int
    max_gzip_ratio: float

    @classmethod
    def from_env(cls) -> Limits:
        mb = _env_number(MAX_EVENT_MB_VAR, DEFAULT_MAX_EVENT_MB)
        return cls(
            max_event=int(mb * (1 << 20)) if mb > 0 else 1 << 62,
            max_gzip_ratio=_env_number(MAX_GZIP_RATIO_VAR, DEFAULT_MAX_GZIP_RATIO),
        )


@dataclass
class Scan:
    """Where the array's top level is in a buffer that starts between two events."""

    cut: int  # index of the last top-level comma, -1 if none
    end: int  # index of the "]" that closes the array, -1 if not in the buffer
    depth: int  # nesting at the buffer's end (1: between events)
    in_string: bool  # whether the buffer ends inside a string


_BLOCK = 8 << 20  # bytes scanned at once: bounds the scan's index arrays


def _blocks(buf: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) blocks of `buf`; a run of backslashes never ends a block, so the byte
    it may escape is always seen with it."""
    n, start = len(buf), 0
    while start < n:
        end = min(start + _BLOCK, n)
        while end < n and buf[end - 1] == 0x5C:
            end += 1
        yield start, end
        start = end


def _structure(buf: bytes, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions and classes of the structural bytes of buf[start:end], escaped quotes and
    backslashes left out."""
    a = np.frombuffer(buf, np.uint8, end - start, start)
    cls = _LUT[a]
    idx = np.flatnonzero(cls)
    kind = cls[idx]
    if buf.find(b"\\", start, end) >= 0:
        kind = _unescape(idx, kind)
        keep = kind != _BACKSLASH
        idx, kind = idx[keep], kind[keep]
    return idx + start, kind


def scan(buf: bytes) -> Scan:
    """Exact scan of `buf`, which starts inside the event array between two events; block
    by block, so memory stays a small multiple of the block whatever `buf` holds."""
    depth0, quotes0, cut = 1, 0, -1
    for start, end in _blocks(buf):
        idx, kind = _structure(buf, start, end)
        quote = kind == _QUOTE
        outside = ((np.cumsum(quote) + quotes0) & 1) == 0  # even number of quotes so far
        quotes0 += int(quote.sum())
        outside &= ~quote
        pos, kind = idx[outside], kind[outside]
        step = np.zeros(len(kind), np.int64)
        step[kind == _OPEN] = 1
        step[kind == _CLOSE] = -1
        depth = depth0 + np.cumsum(step)
        closed = np.flatnonzero(depth <= 0)
        commas = (kind == _COMMA) & (depth == 1)
        if len(closed):
            commas[closed[0] :] = False
        ci = np.flatnonzero(commas)
        if len(ci):
            cut = int(pos[ci[-1]])
        if len(closed):
            return Scan(cut=cut, end=int(pos[closed[0]]), depth=0, in_string=False)
        if len(depth):
            depth0 = int(depth[-1])
    return Scan(cut=cut, end=-1, depth=depth0, in_string=bool(quotes0 & 1))


def _unescape(idx: np.ndarray, kind: np.ndarray) -> np.ndarray:
    """`kind` with escaped quotes (an odd run of backslashes before them) made ordinary."""
    kind = kind.copy()
    slash = idx[kind == _BACKSLASH]
    starts = slash[np.r_[True, np.diff(slash) != 1]]  # first backslash of each run
    q = np.flatnonzero(kind == _QUOTE)
    qpos = idx[q]
    after = np.isin(qpos - 1, slash)
    if after.any():
        run_start = starts[np.searchsorted(starts, qpos[after] - 1, side="right") - 1]
        escaped = ((qpos[after] - run_start) & 1) == 1
        kind[q[after][escaped]] = 0
    return kind


def squeeze(buf: bytes) -> bytes:
    """`buf` (starting between events) without whitespace outside strings."""
    out, quotes0 = [], 0
    for start, end in _blocks(buf):
        idx, kind = _structure(buf, start, end)
        a = np.frombuffer(buf, np.uint8, end - start, start)
        quote = np.zeros(len(a), np.uint8)
        quote[idx[kind == _QUOTE] - start] = 1
        inside = (np.bitwise_xor.accumulate(quote) ^ (quotes0 & 1)).astype(bool)
        quotes0 += int(quote.sum())
        out.append(a[~(_SPACE[a] & ~inside)].tobytes())
    return b"".join(out)


class EventArray:
    """The event array of one document read from the binary stream `f`.

    `header` is the text before the array (the top-level object's first keys, "{" stripped
    off and "traceEvents" cut), `trailer` the text after it; both bounded. Iterating yields
    runs of whole events as bytes (`[` + run + `]` is a JSON array)."""

    def __init__(self, f, *, exact: bool, limits: Limits, compressed_size: int | None = None):
        self.f = f
        self.exact = exact
        self.limits = limits
        self.compressed_size = compressed_size
        self.read_bytes = 0
        self.header = b""
        self.trailer = b""
        self.bare = False  # a top-level array, not an object
        self.fast_cuts = 0
        # a plain file's pieces are verbatim slices of it: `piece_offset` says where the
        # last one starts, so a worker process can read it itself instead of through a pipe
        self._verbatim = compressed_size is None
        self.piece_offset: int | None = None
        self._start = self._find_array()

    def _read(self) -> bytes:
        data = self.f.read(CHUNK)
        self.read_bytes += len(data)
        ratio = self.limits.max_gzip_ratio
        if (
            self.compressed_size is not None
            and ratio > 0
            and self.read_bytes > max(GZIP_RATIO_FLOOR, ratio * self.compressed_size)
        ):
            raise TooBig(
                f"expands to more than {ratio:g} times its size, past "
                f"{GZIP_RATIO_FLOOR >> 30} GiB (a compression bomb?); set {MAX_GZIP_RATIO_VAR} to a "
                "higher ratio, or 0 for no limit, to read it anyway"
            )
        return data

    def _find_array(self) -> bytes:
        buf = self._read()
        while buf and not buf.strip():  # leading whitespace: never kept
            buf = self._read()
        buf = buf.lstrip()
        if buf[:1] == b"[":
            self.bare = True
            return buf[1:]
        if buf[:1] != b"{":
            raise StreamError("it is not JSON")
        head = buf
        while True:
            m = _TRACE_EVENTS.search(head)
            if m:
                self.header = head[1 : m.start()]
                return head[m.end() :]
            if len(head) > HEAD_LIMIT:
                raise StreamError(f'no "traceEvents" list in its first {HEAD_LIMIT >> 20} MiB')
            more = self._read()
            if not more:
                raise StreamError('it has no "traceEvents" list')
            if not more.strip():
                head = head.rstrip() + b" "  # whitespace runs never accumulate
                continue
            head += more

    def __iter__(self) -> Iterator[bytes]:
        for piece, offset, length in self.spans():
            if piece is None:  # skimmed: read it now
                self.f.seek(offset)
                piece = self.f.read(length)
            yield piece

    def spans(self) -> Iterator[tuple[bytes | None, int | None, int]]:
        """(piece, offset, length) of each run of whole events, in file order: `offset` is
        where the piece lies in a plain file (None where it is no verbatim slice), and the
        piece is None where it was only skimmed (`_skim`): read it there."""
        buf = self._start
        self._start = b""
        start = self.read_bytes - len(buf)
        if self._skimmable(start):
            for offset, length in self._skim(start):
                start = offset + length + 1
                self.piece_offset = offset
                yield None, offset, length
            self.f.seek(start)  # the rest streams from there, between two events
            self.read_bytes = start
            buf = b""
        eof = False
        while True:
            if not eof:
                more = self._read()
                eof = not more
                if more:
                    if not more.strip():
                        # a chunk of only whitespace: between events it is dropped, inside
                        # one it is insignificant (a string holding 16 MiB of spaces is
                        # shortened to one)
                        if buf.strip():
                            buf += b" "
                            self._verbatim = False
                        else:
                            buf = b""
                        continue
                    buf += more
            if eof or len(buf) >= CHUNK:
                offset = self.read_bytes - len(buf)
                piece, buf, done = self._cut(buf, eof)
                if piece is not None and piece.strip():
                    self.piece_offset = offset if self._verbatim else None
                    yield piece, self.piece_offset, len(piece)
                if done:
                    self._read_trailer(buf)
                    return
                if eof:
                    raise StreamError("the event list never ends")

    def _skimmable(self, start: int) -> bool:
        """Whether pieces from `start` on can be cut without reading them: fast cuts in a
        plain file longer than two chunks from there."""
        if self.exact or not self._verbatim:
            return False
        try:
            return self.f.seekable() and start + 2 * CHUNK <= os.fstat(self.f.fileno()).st_size
        except (AttributeError, OSError, ValueError):
            return False

    def _skim(self, start: int) -> Iterator[tuple[int, int]]:
        """(offset, length) of pieces of a plain file from `start` (between two events), each
        cut at the last fast cut in the window before the chunk's end, found by reading that
        window alone: the parent never reads (page-faults, copies) the bytes a worker parses,
        and, as for any fast cut, a wrong one fails the piece's parse. Stops where a window
        holds no cut (a giant event, a whitespace run) and before the file's last two
        chunks (where the array ends): the stream goes on from there."""
        size = os.fstat(self.f.fileno()).st_size
        window = min(_FAST_WINDOW, CHUNK)
        while start + 2 * CHUNK <= size:
            end = start + CHUNK
            self.f.seek(end - window)
            data = self.f.read(window)
            if len(data) < window:
                return
            last = None
            for lo in (max(0, window - _SKIM_TAIL), 0):  # the window's tail holds one, mostly
                for m in _FAST_CUT.finditer(data, lo):
                    last = m
                if last is not None or lo == 0:
                    break
            if last is None:
                return
            comma = end - window + data.index(b",", last.start())
            self.fast_cuts += 1
            yield start, comma - start
            start = comma + 1

    def _cut(self, buf: bytes, eof: bool) -> tuple[bytes | None, bytes, bool]:
        """(run of whole events or None, what is kept back, whether the array ended)."""
        if not self.exact and not eof:
            window = max(0, len(buf) - _FAST_WINDOW)
            last = None
            for m in _FAST_CUT.finditer(buf, window):
                last = m
            if last is None and window:
                for m in _FAST_CUT.finditer(buf):
                    last = m
            if last is not None:
                comma = buf.index(b",", last.start())
                self.fast_cuts += 1
                return buf[:comma], buf[comma + 1 :], False
        s = scan(buf)
        if s.end >= 0:
            return buf[: s.end], buf[s.end + 1 :], True
        if s.cut >= 0:
            return buf[: s.cut], buf[s.cut + 1 :], False
        if not buf.strip():
            return None, b"", False
        if len(buf) > self.limits.max_event:
            buf = squeeze(buf)
            self._verbatim = False
            if len(buf) > self.limits.max_event:
                raise TooBig(
                    f"holds one event of more than {self.limits.max_event / 2**20:g} MiB; set "
                    f"{MAX_EVENT_MB_VAR} to a larger number of MiB to read it anyway"
                )
        return None, buf, False

    def _read_trailer(self, rest: bytes) -> None:
        """Keep the document's end (its last keys), bounded; check that it ends."""
        parts = [rest]
        size = len(rest)
        while True:
            more = self._read()
            if not more:
                break
            if not more.strip():
                continue
            if size < TRAILER_LIMIT:
                parts.append(more)
                size += len(more)
        text = b"".join(parts).strip()
        if self.bare:
            if text:
                raise StreamError("something follows the event list")
        elif size < TRAILER_LIMIT and not text.endswith(b"}"):
            raise StreamError("the file ends mid-document")
        self.trailer = text[:-1] if text.endswith(b"}") else text
