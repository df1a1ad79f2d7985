"""`membound compare` on hostile variants of real report JSONs keeps issue 17's contract:
exit 0 with no "nan"/"inf" printed and a comparison JSON that parses strictly, or exit 2 with
exactly one line on stderr. The reports come from `membound analyze` on the bases, once per
session (conftest `reports`).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import Phase, given, settings

from fuzz.conftest import SUBPROCESS_EXAMPLES
from fuzz.contract import contract_violations, run_subprocess
from fuzz.mutate_report import EMPTY_TRACE, REPORT_KINDS, render_report, report_mutations

pytestmark = pytest.mark.fuzz

#: report mutation kinds that break the contract on main today (kind -> reason); see
#: test_fuzz_analyze.KNOWN. Empty this as the fixes of issue 17 land.
KNOWN: dict[str, str] = {}

NO_SHRINK = tuple(p for p in Phase if p is not Phase.shrink)


def _kinds(kinds, known):
    return [pytest.param(k, marks=pytest.mark.xfail(reason=known[k], strict=False))
            if k in known else k for k in kinds]  # fmt: skip


def _inputs(mutation, side: str, reports: dict, root: Path) -> tuple[Path, list[str]]:
    work = Path(tempfile.mkdtemp(dir=root))
    (work / "good.json").write_text(json.dumps(reports[mutation.base]))
    (work / "bad.json").write_bytes(render_report(mutation, reports))
    before = "good.json" if side == "after" else "bad.json"
    after = "good.json" if side == "before" else "bad.json"
    return work, ["compare", before, after, "--json", "cmp.json"]


def _check(m, side: str, o, work: Path, how: str) -> None:
    bad = contract_violations(o, work / "cmp.json", check_report=False)
    assert not bad, (
        f"\n  mutation: {m} as {side}\n  run: {how}\n  outcome: {o.summary()}\n  broken: {bad}"
        f"\n  stdout (tail): {o.stdout[-600:]}\n  stderr (tail): {o.stderr[-1200:]}"
    )


def test_unmutated_reports_compare_cleanly(reports, fuzz_dir, cache_dir):
    """The control: each base report against the next one gives exit 0, a clean comparison
    (two different reports: compare refuses one report given twice)."""
    names = sorted(set(reports) - {EMPTY_TRACE})  # the empty one: test_compare_kind[empty-trace]
    for before, after in zip(names, names[1:] + names[:1], strict=True):
        work = Path(tempfile.mkdtemp(dir=fuzz_dir))
        (work / "before.json").write_text(json.dumps(reports[before]))
        (work / "after.json").write_text(json.dumps(reports[after]))
        argv = ["compare", "before.json", "after.json", "--json", "cmp.json"]
        o = run_subprocess(argv, work, cache_dir)
        assert o.rc == 0 and not contract_violations(o, work / "cmp.json", check_report=False), (
            before, after, o.summary())  # fmt: skip


@pytest.mark.parametrize("kind", _kinds(REPORT_KINDS, KNOWN))
def test_compare_kind(kind, reports, driver, fuzz_dir):
    @settings(phases=NO_SHRINK if kind in KNOWN else settings().phases)
    @given(case=report_mutations(reports, kinds=(kind,)))
    def prop(case):
        m, side = case
        work, argv = _inputs(m, side, reports, fuzz_dir)
        _check(m, side, driver.run(argv, work), work, "in-process driver")

    prop()


def test_compare_subprocess(reports, fuzz_dir, cache_dir):
    """One `python -m membound.cli compare` per input: the exit code and stderr a user sees."""
    kinds = [k for k in REPORT_KINDS if k not in KNOWN]

    @settings(max_examples=max(SUBPROCESS_EXAMPLES // 2, 1))
    @given(case=report_mutations(reports, kinds=kinds))
    def prop(case):
        m, side = case
        work, argv = _inputs(m, side, reports, fuzz_dir)
        _check(m, side, run_subprocess(argv, work, cache_dir), work, "subprocess")

    prop()
