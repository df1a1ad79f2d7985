"""Events no analysis can use, taken out before any figure is computed, each kind counted in a
note of the report (`clean_trace`).

A trace from a crashed job, a hand-edited file or another tool can hold events that would
otherwise turn into confident garbage: a negative kernel duration subtracts GPU time and
invents idle; a NaN timestamp makes every step NaN; one kernel 1e300 µs long swallows the
steps; every event carrying the same correlation id joins all kernels to one op. What is
dropped or not joined, and why:

- **Untimed events**: `ts` or `dur` missing, null, non-numeric or not finite (the reader
  stores those as NaN), a negative `dur`, a `dur` over `MAX_DUR_US` (a day) or a `ts` past
  `MAX_TS_US` (a µs clock that far is no clock): the event is left out.
- **Duplicate step marks**: step marks with the same name, or starting at the same time
  (a zero-length step would enter the median): one is kept (the longest at that time, the
  earliest of that name). A mark recorded twice with the same name at the same time (some
  torch versions file it as both cpu_op and user_annotation) is not worth a note.
- **Ambiguous correlation ids**: a correlation id is how a GPU activity finds the runtime
  call that launched it. An id carried by two runtime calls, or by more than
  `MAX_PER_LAUNCH` GPU activities of a call that is not a graph launch (a kernel launch
  issues one kernel), cannot say which call launched what: those activities are not joined
  to ops (ids set to `AMBIGUOUS`), so no op is credited with another's kernels, and they
  place no step boundary on the GPU's clock.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from membound.errors import BadInput
from membound.trace.model import GRAPH_LAUNCH, STEP, Table, Trace

#: an event longer than a day is no profiler event (µs)
MAX_DUR_US = 86_400e6
#: a timestamp past this is no µs clock (~3000 years)
MAX_TS_US = 1e17
#: GPU activities one non-graph runtime call may launch (a kernel launch issues one)
MAX_PER_LAUNCH = 8
#: the correlation id given to activity whose id names no single launch call (-1: none)
AMBIGUOUS = -2

_TABLES = ("cpu", "runtime", "gpu")


@dataclass
class Cleaned:
    """`clean_trace`'s answer: the usable trace, one note per kind of event left out, and the
    host start (µs) of each step to leave out of the figures (its mark had no usable `dur`,
    or the next mark no usable `ts`: the step's extent is unknown)."""

    trace: Trace
    notes: list[str] = field(default_factory=list)
    skip_steps: frozenset[float] = frozenset()

    def windows(self, windows: list) -> list:
        """`timeline.step_windows`' windows without the steps to leave out."""
        return [w for w in windows if w[3] not in self.skip_steps]


#: why an event is left out, as the note says it
UNTIMED = "a missing, null or non-numeric ts or dur"
NEGATIVE = "a negative dur"
ABSURD = "a dur over a day or a ts past any clock"
#: the loader's drop reasons (`trace.model.DROP_REASONS`) in this module's words
_LOADER_REASONS = {
    "bad_ts": UNTIMED,
    "bad_dur": UNTIMED,
    "negative_dur": NEGATIVE,
    "huge_dur": ABSURD,
}


def clean_trace(trace: Trace) -> Cleaned:
    """The trace without the events no analysis can use (module docstring), and one note per
    kind of event left out saying how many (`Cleaned.trace` is the same object when nothing
    is wrong). BadInput when no event of a trace that had some is usable."""
    notes: list[str] = []
    tables = {}
    # what the loader already dropped (GPU activities and runtime calls with bad times,
    # `Trace.dropped`) is told in the same note and counts towards "none usable"
    loader = getattr(trace, "dropped", None) or {}
    had = sum(len(getattr(trace, t)) for t in _TABLES) + sum(loader.values())
    dropped: dict[str, int] = {}
    for key, reason in _LOADER_REASONS.items():
        if loader.get(key):
            dropped[reason] = dropped.get(reason, 0) + int(loader[key])
    skip: set[float] = set()
    bad_marks = 0
    for attr in _TABLES:
        table = getattr(trace, attr)
        if not len(table):
            tables[attr] = table
            continue
        ts, dur = table.ts, table.dur
        with np.errstate(invalid="ignore"):
            bad_ts = ~np.isfinite(ts) | (np.abs(ts) > MAX_TS_US)
            bad_dur = ~np.isfinite(dur) | (dur < 0) | (dur > MAX_DUR_US)
        if attr == "cpu" and (bad_ts | bad_dur).any():
            table, bad_ts, bad_dur, skip, bad_marks = _bad_step_marks(table, bad_ts, bad_dur)
            ts, dur = table.ts, table.dur
        with np.errstate(invalid="ignore"):
            untimed = ~np.isfinite(ts) | ~np.isfinite(dur)
            negative = ~untimed & (dur < 0)
            absurd = ~untimed & ~negative & (bad_ts | bad_dur)
        for reason, mask in (
            (UNTIMED, untimed),
            (NEGATIVE, negative),
            (ABSURD, absurd),
        ):
            n = int(mask.sum())
            if n:
                dropped[reason] = dropped.get(reason, 0) + n
        bad = untimed | negative | absurd
        tables[attr] = _keep(table, ~bad) if bad.any() else table
    if bad_marks:
        notes.append(
            f"{bad_marks} step mark(s) without a usable ts or dur: the {len(skip)} step(s) they "
            "bound left out"
        )
    if dropped:
        total = sum(dropped.values())
        if total == had:
            raise BadInput(
                f"{trace.path}: none of its {had} events has a usable ts and dur "
                f"({', '.join(dropped)}); pass a trace written by the PyTorch profiler."
            )
        notes.append(
            f"{total} event(s) left out: "
            + ", ".join(f"{n} with {reason}" for reason, n in dropped.items())
        )
    cpu, n_dup = _dedupe_steps(tables["cpu"])
    if n_dup:
        tables["cpu"] = cpu
        notes.append(
            f"{n_dup} duplicate step mark(s) left out (a step name or start time seen twice)"
        )
    runtime, gpu, n_amb = _unjoin_ambiguous(tables["runtime"], tables["gpu"], trace.names)
    if n_amb:
        tables["runtime"], tables["gpu"] = runtime, gpu
        notes.append(
            f"{n_amb} GPU activities carry a correlation id that does not name one launch call "
            "(shared by several runtime calls, or by many activities of one kernel launch): "
            "they are not joined to ops"
        )
    skip_steps = frozenset(skip)
    if all(tables[a] is getattr(trace, a) for a in _TABLES):
        return Cleaned(trace, notes, skip_steps)
    return Cleaned(dataclasses.replace(trace, **tables), notes, skip_steps)


def _bad_step_marks(cpu: Table, bad_ts: np.ndarray, bad_dur: np.ndarray):
    """Step marks the timeline cannot time, turned into steps to skip: a mark with a usable
    ts and no usable dur is kept (dur 0) and its own step skipped; one without a usable ts
    is dropped with the other untimed events, and the step before it by number (which it
    ends) skipped. Returns the table, the masks left to drop, the host starts to skip and
    how many marks were bad."""
    step = cpu.role == STEP
    marks = step & (bad_ts | bad_dur)
    if not marks.any():
        return cpu, bad_ts, bad_dur, set(), 0
    skip: set[float] = set()
    own = marks & ~bad_ts  # ts usable: the step starts there, its end is unknown
    skip.update(cpu.ts[own].tolist())
    good = step & ~bad_ts & ~bad_dur
    numbers, starts = cpu.step[good], cpu.ts[good]
    for n in cpu.step[marks & bad_ts].tolist():
        before = (numbers < n) & (numbers >= 0) if n >= 0 else np.zeros(len(numbers), bool)
        if before.any():
            skip.add(float(starts[before][np.argmax(numbers[before])]))
    dur = np.where(own, 0.0, cpu.dur)
    return Table({**cpu.cols, "dur": dur}), bad_ts, bad_dur & ~own, skip, int(marks.sum())


def _keep(table: Table, mask: np.ndarray) -> Table:
    return Table({k: v[mask] for k, v in table.cols.items()})


def _dedupe_steps(cpu: Table) -> tuple[Table, int]:
    """Step marks with a name or a start seen before made plain annotations (role 0); the
    count of those that were not the same mark recorded twice."""
    if not len(cpu):
        return cpu, 0
    idx = np.flatnonzero(cpu.role == STEP)
    if len(idx) < 2:
        return cpu, 0
    order = idx[np.lexsort((-cpu.dur[idx], cpu.ts[idx]))]
    seen_names: set[int] = set()
    seen_ts: set[float] = set()
    exact: set[tuple[int, float]] = set()
    drop, noted = [], 0
    rows = zip(order.tolist(), cpu.name[order].tolist(), cpu.ts[order].tolist(), strict=True)
    for i, name, ts in rows:
        if name in seen_names or ts in seen_ts:
            drop.append(i)
            noted += (name, ts) not in exact
            continue
        seen_names.add(name)
        seen_ts.add(ts)
        exact.add((name, ts))
    if not noted:
        return cpu, 0  # only the same marks recorded twice: the timeline keeps one of each
    role = cpu.role.copy()
    role[drop] = 0
    return Table({**cpu.cols, "role": role}), noted


def _unjoin_ambiguous(runtime: Table, gpu: Table, names: list[str]) -> tuple[Table, Table, int]:
    """Correlation ids that cannot name one launch set to `AMBIGUOUS` on both sides; the
    number of GPU activities that lost their join."""
    if not len(runtime) or not len(gpu):
        return runtime, gpu, 0
    rc, gc = runtime.correlation, gpu.correlation
    ids, counts = np.unique(rc[rc >= 0], return_counts=True)
    bad = ids[counts > 1]
    # a non-graph call credited with many activities
    gids, gcounts = np.unique(gc[gc >= 0], return_counts=True)
    crowded = gids[gcounts > MAX_PER_LAUNCH]
    if len(crowded):
        sel = np.isin(rc, crowded)
        call = getattr(runtime, "call", None)
        if call is not None:
            single = rc[sel][call[sel] != GRAPH_LAUNCH]
        else:  # a hand-built table without call kinds: by name
            graph = np.array([isinstance(n, str) and "Graph" in n for n in names] or [False])
            single = rc[sel][~graph[runtime.name[sel]]]
        bad = np.union1d(bad, single)
    if not len(bad):
        return runtime, gpu, 0
    g_bad = np.isin(gc, bad)
    r_bad = np.isin(rc, bad)
    rt = Table({**runtime.cols, "correlation": np.where(r_bad, AMBIGUOUS, rc)})
    gp = Table({**gpu.cols, "correlation": np.where(g_bad, AMBIGUOUS, gc)})
    return rt, gp, int(g_bad.sum())
