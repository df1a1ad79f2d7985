"""The step marks file (`capture.steps.jsonl`): what a capture's steps reached, kept on disk as
they happen, so that a run killed outright (SIGKILL, an OOM kill) still says how far it got.

One JSON line when the capture starts (`start`, `pid`, `wait`, `warmup`, `steps`), one per step
boundary (`boundary`, `t`: the step clock's time), and one when the profiler stops (`end`,
`partial_step`, `ended`). The lines go to the file's buffer and reach the disk at most
`MARKS_FLUSH_S` later, and at every phase change and any exit the capture sees. A file that
cannot be written (a full disk, a closed file) is dropped: the capture goes on without it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

#: the step marks file (`capture.steps.jsonl`) is flushed at least this often (seconds of
#: the step clock), besides every phase change and exit: a process killed outright loses at
#: most this much of it
MARKS_FLUSH_S = 1.0


class StepMarks:
    """The step marks file of one capture: opened when the capture starts, closed with it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: Any = None
        self._flushed = 0.0  # perf_counter() of the last flush

    def open(self, **header: Any) -> str | None:
        """Open the file and write its first line (`start`: now, then `header`); the note to
        add to the capture's when it cannot be opened, else None."""
        try:
            self._file = open(self.path, "w")  # noqa: SIM115
        except OSError as exc:  # the capture goes on; only the per-step record is lost
            return f"could not write the step marks to {self.path} ({exc})"
        self._write_line({"start": time.time(), **header})
        return None

    def mark(self, boundary: int, t: float) -> None:
        """One line per step boundary, formatted by hand as `json.dumps` would (an int and a
        finite float) at a third of its cost, and written to the file's buffer: it reaches
        the disk at most `MARKS_FLUSH_S` later, and at every phase change and any exit the
        capture sees. A write per line (line buffering) cost 14 us a step inside a training
        step on a CI core, where the rest of the capture's per-step work costs 7."""
        if self._file is None:
            return
        self._write_text(f'{{"boundary": {int(boundary)}, "t": {t!r}}}\n', flush=False)
        if t - self._flushed >= MARKS_FLUSH_S:
            self.flush()

    def end(self, **fields: Any) -> None:
        """The last line (`end`: now, then `fields`), where the file is still open."""
        if self._file is not None:
            self._write_line({"end": time.time(), **fields})

    def _write_line(self, record: dict) -> None:
        self._write_text(json.dumps(record) + "\n")

    def _write_text(self, line: str, flush: bool = True) -> None:
        try:
            self._file.write(line)
        except (OSError, ValueError, AttributeError):  # a full disk, a closed file: go on
            self._file = None
            return
        if flush:
            self.flush()

    def flush(self) -> None:
        self._flushed = time.perf_counter()
        try:
            if self._file is not None:
                self._file.flush()
        except (OSError, ValueError):
            self._file = None

    def close(self) -> None:
        f, self._file = self._file, None
        if f is not None:
            try:
                f.close()
            except OSError:
                pass


def read_step_marks(path: str | os.PathLike) -> list[int]:
    """The step boundaries a capture's `capture.steps.jsonl` recorded (a run that ended
    before writing its trace leaves them); unreadable lines are skipped."""
    out = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("boundary"), int):
                    if record["boundary"] > 0:
                        out.append(record["boundary"])
    except OSError:
        return []
    return out
