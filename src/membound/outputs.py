"""Where a command writes: every output path checked before any work starts.

A report path that cannot be written is a one-line `BadInput` (exit code 2) at the start, not a
traceback after minutes of measuring. The rules, the same for every verb:

- a file output (`--json`, `--html`, `--annotate`, `--plot`) goes into a folder that exists:
  membound never creates the parents of a report file (`--json /nonexistent/x.json` is
  refused, where it used to create `/nonexistent/`). An existing file is overwritten; an
  existing non-file that can take writes (`/dev/stdout`, a FIFO) is accepted as given.
- a folder output (`diagnose --out`, `demo --out`) is created, parents included.
- nothing is written under `/proc` or `/sys`, and a folder must take a new file (probed with
  a file created and removed at once: root passes permission checks that a read-only
  filesystem, or procfs, still refuses).

Several inputs, several outputs: `per_input` names each output after its input, uniquely
(`unique_labels`), so no report silently overwrites another.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path

from membound.errors import BadInput

#: kernel pseudo-filesystems: files there are not reports
PSEUDO = (Path("/proc"), Path("/sys"))
TRACE_SUFFIXES = (".json.gz", ".json", ".gz")


def output_file(
    path: str | os.PathLike | None,
    flag: str,
    *,
    suffixes: Sequence[str] | None = None,
    folder_ok: bool = False,
) -> Path | None:
    """The absolute path of a file a command will write, checked now; None when not asked.

    `flag` names the option in the message (`--json`); `suffixes`: the endings the file name
    must have; `folder_ok`: an existing folder is accepted (the writer picks a name in it)."""
    if path is None or str(path) == "":
        return None
    given = str(path)
    p = Path(os.path.abspath(given))
    where = f"{flag} {given}"
    if suffixes and not folder_ok and not any(p.name.lower().endswith(s) for s in suffixes):
        raise BadInput(f"{where}: the file name must end in {' or '.join(suffixes)}.")
    try:
        st = os.stat(p)
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        raise BadInput(f"{where}: {_file_above(p)} is a file, not a folder.") from None
    except OSError as exc:
        raise BadInput(f"{where}: cannot reach it ({exc.strerror}).") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        if folder_ok:
            return output_dir(p, flag, create=False)
        raise BadInput(f"{where} is a folder; give a file name (e.g. {p / 'report'}{_ext(flag)}).")
    if given.endswith(os.sep) and not folder_ok:
        raise BadInput(f"{where} names a folder; give a file name.")
    if st is not None and not stat.S_ISREG(st.st_mode):
        # a device or a FIFO the user points at (/dev/stdout, /dev/null): written as given
        if not os.access(p, os.W_OK):
            raise BadInput(f"{where}: cannot write to it (permission denied).")
        return p
    _refuse_pseudo(p, where)
    parent = p.parent
    if st is None:
        if not parent.exists():
            above = _file_above(parent)
            if above is not None:
                raise BadInput(f"{where}: {above} is a file, not a folder.")
            raise BadInput(
                f"{where}: the folder {parent} does not exist; create it first, or give a "
                "path in an existing folder."
            )
        if not parent.is_dir():
            raise BadInput(f"{where}: {parent} is a file, not a folder.")
        _probe(parent, where)
        return p
    try:  # an existing file: it must open for writing (without truncating it now)
        os.close(os.open(p, os.O_WRONLY | os.O_APPEND))
    except OSError as exc:
        raise BadInput(f"{where}: cannot write to it ({exc.strerror}).") from None
    return p


def output_dir(path: str | os.PathLike, flag: str, *, create: bool = True) -> Path:
    """The absolute path of a folder a command writes into, checked (and created, with its
    parents, when `create`) now."""
    given = str(path)
    p = Path(os.path.abspath(given))
    where = f"{flag} {given}"
    _refuse_pseudo(p, where)
    above = _file_above(p)
    if above is not None:
        what = "is a file" if above == p else f"is under {above}, a file,"
        raise BadInput(f"{where} {what} not a folder; give a folder (it is created if missing).")
    existing = p
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    _probe(existing, where)
    if create:
        try:
            p.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BadInput(f"{where}: cannot create the folder ({exc.strerror}).") from None
    return p


def unique_labels(inputs: Sequence[str | os.PathLike]) -> list[str]:
    """A distinct short label per input, for naming its outputs: the file name without its
    trace suffix, with as many parent folders in front (joined by `-`) as it takes to tell
    inputs apart (`a/trace.json.gz`, `b/trace.json.gz` -> `a-trace`, `b-trace`); the same
    file given twice gets `-2`, `-3`."""
    paths = [tuple(_stem_parts(Path(os.path.abspath(str(p))))) for p in inputs]
    distinct = list(dict.fromkeys(paths))
    depth = dict.fromkeys(distinct, 1)
    while True:
        cand = {p: "-".join(p[-depth[p] :]) for p in distinct}
        clash = [p for p in distinct if list(cand.values()).count(cand[p]) > 1]
        grow = [p for p in clash if depth[p] < len(p)]
        if not grow:
            break
        for p in grow:
            depth[p] += 1
    seen: dict[str, int] = {}
    out = []
    for p in paths:
        label = cand[p]
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label}-{seen[label]}")
    return out


def per_input(path: Path, label: str, suffix: str) -> Path:
    """`path` with the input's label before `suffix` (`r.json` + `a-trace` -> `r.a-trace.json`)."""
    name = path.name
    stem = name[: -len(suffix)] if name.lower().endswith(suffix) else Path(name).stem
    return path.with_name(f"{stem}.{label}{suffix}")


# ---- helpers ---------------------------------------------------------------------------
def _stem_parts(p: Path) -> list[str]:
    name = p.name
    for s in TRACE_SUFFIXES:
        if name.lower().endswith(s) and len(name) > len(s):
            name = name[: -len(s)]
            break
    folders = [q for q in p.parent.parts if q not in ("/", "")]
    return [*folders, name]


def _file_above(p: Path) -> Path | None:
    """The first existing non-folder on the way down to `p` (itself included), or None."""
    for q in [*reversed(p.parents), p]:
        try:
            st = os.stat(q)
        except OSError:
            return None
        if not stat.S_ISDIR(st.st_mode):
            return q
    return None


def _refuse_pseudo(p: Path, where: str) -> None:
    real = p.resolve(strict=False)
    for root in PSEUDO:
        if real == root or root in real.parents:
            raise BadInput(
                f"{where} is inside {root}, a kernel pseudo-filesystem; give a path on disk."
            )


def _probe(folder: Path, where: str) -> None:
    """A file can be created in `folder` (one is, and is removed at once)."""
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=".membound-probe-")
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            reason = "it is read-only" if exc.errno == errno.EROFS else "permission denied"
        raise BadInput(f"{where}: cannot write in the folder {folder} ({reason}).") from None
    os.close(fd)
    os.unlink(name)


def _ext(flag: str) -> str:
    return {"--json": ".json", "--html": ".html", "--annotate": ".json.gz"}.get(flag, "")
