"""`membound analyze` on hostile variants of the recorded traces keeps issue 17's contract.

Each kind of mutation is its own test (so a failure names its kind and shrinks inside it),
run through the in-process driver; `test_analyze_subprocess` draws from every kind and runs
one real `python -m membound.cli` per input, the way a user does.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from fuzz.conftest import SUBPROCESS_EXAMPLES
from fuzz.contract import contract_violations, run_subprocess
from fuzz.mutate import (
    BASES,
    TRACE_KINDS,
    Mutation,
    base_trace,
    dumps,
    render_trace,
    trace_mutations,
)

pytestmark = pytest.mark.fuzz

#: mutation kinds that break the contract on main today, with the layer that must fix them.
#: Their tests are xfail (not strict) and the subprocess test leaves them out; empty this as
#: the fixes of issue 17 land. Each entry: kind -> reason.
KNOWN: dict[str, str] = {
    "retype.name": "loader: a name/cat/ph that is null, a number, a list or an object: "
    "AttributeError/TypeError in trace/kineto.py add and kineto_names.classify",
    "retype.time": "loader+report: null or non-numeric ts/dur: ValueError (NaN) in "
    "report/terminal.py _bar; dur 1e300: shares over 1; analysis: 0-ms steps",
    "retype.ids": "loader: correlation/stream 2**70 or -2**64: OverflowError in kineto._column",
    "retype.args": "loader: args that is not an object: AttributeError in trace/kineto.py add",
    "retype.top": "loader: traceEvents [{}]: exit 0 with an empty report",
    "negate": "analysis: negative dur/ts: negative op and copy time, 0-ms steps",
    "huge-time": "analysis: ts/dur 1e300: 0-ms steps; a kernel dur of 1e-300: 'inf' printed",
    "duplicate-steps": "analysis: duplicate step marks: 0-ms steps, share_of_gpu_time over 1",
    "same-correlation": "loader: correlation 2**70: OverflowError; analysis: one correlation "
    "id for all: share_of_gpu_time over 1, 0-ms steps",
    "drop-field": "loader+report: a step without ts: ValueError (NaN) in report/terminal.py _bar; "
    "no dur or ph: exit 0 with 0-ms steps or no steps",
    "drop-events": "analysis: one step mark: share_of_gpu_time over 1; no runtime events: "
    "0-ms steps",
    "nest": "loader: 10**4-deep nesting on the streaming path: RecursionError; a nested name: "
    "unhashable",
    "empty": "loader: [], {}, no events, metadata only: exit 0 with an empty report",
    "non-object-events": "loader: events that are not objects: exit 0 with an empty report",
    "foreign": "loader: a Chrome/Blink trace: exit 0 with an empty report",
}

NO_SHRINK = tuple(p for p in Phase if p is not Phase.shrink)  # an expected failure: no minimizing


def _kinds(kinds, known):
    return [pytest.param(k, marks=pytest.mark.xfail(reason=known[k], strict=False))
            if k in known else k for k in kinds]  # fmt: skip


def _input(m: Mutation, root: Path) -> tuple[Path, Path]:
    work = Path(tempfile.mkdtemp(dir=root))
    trace = work / f"trace{m.suffix}"
    trace.write_bytes(render_trace(m))
    return work, trace


def _argv(trace: Path, quiet: bool) -> list[str]:
    return ["analyze", str(trace), "--json", "report.json",
            *(["--quiet"] if quiet else ["--format", "plain"])]  # fmt: skip


def _check(m: Mutation, o, work: Path, how: str) -> None:
    bad = contract_violations(o, work / "report.json")
    assert not bad, (
        f"\n  mutation: {m}\n  run: {how}\n  outcome: {o.summary()}\n  broken: {bad}"
        f"\n  stderr (tail): {o.stderr[-1200:]}"
    )


@pytest.mark.parametrize("base", sorted(BASES))
def test_unmutated_bases_keep_the_contract(base, fuzz_dir, cache_dir):
    """The control: the bases themselves give exit 0 and a sane report, in a real process."""
    m = Mutation("none", base, (("doc", "unchanged"),))
    work = Path(tempfile.mkdtemp(dir=fuzz_dir))
    (work / "trace.json").write_bytes(dumps(base_trace(base)))
    o = run_subprocess(_argv(work / "trace.json", quiet=False), work, cache_dir)
    _check(m, o, work, "subprocess")
    assert o.rc == 0, o.summary()


@pytest.mark.parametrize("kind", _kinds(TRACE_KINDS, KNOWN))
def test_analyze_kind(kind, driver, fuzz_dir):
    @settings(phases=NO_SHRINK if kind in KNOWN else settings().phases)
    @given(m=TRACE_KINDS[kind])
    def prop(m):
        work, trace = _input(m, fuzz_dir)
        _check(m, driver.run(_argv(trace, quiet=False), work), work, "in-process driver")

    prop()


def test_analyze_subprocess(fuzz_dir, cache_dir):
    """One `python -m membound.cli analyze` per input: the exit code and stderr a user sees."""
    kinds = [k for k in TRACE_KINDS if k not in KNOWN]

    @settings(max_examples=SUBPROCESS_EXAMPLES)
    @given(m=trace_mutations(kinds), quiet=st.booleans())
    def prop(m, quiet):
        work, trace = _input(m, fuzz_dir)
        o = run_subprocess(_argv(trace, quiet), work, fuzz_dir / "membound-cache")
        _check(m, o, work, f"subprocess{' --quiet' if quiet else ''}")

    prop()
