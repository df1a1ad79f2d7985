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
KNOWN: dict[str, str] = {}

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
