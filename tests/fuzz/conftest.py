"""Hypothesis profiles and the shared, session-wide pieces of the fuzz suite.

Profiles: `ci` (the default: few examples, derandomized so CI is reproducible) and `fuzz-long`
(for a deep local run: HYPOTHESIS_PROFILE=fuzz-long python -m pytest tests/fuzz).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from fuzz.contract import Driver, contract_violations, run_subprocess
from fuzz.mutate import BASES, base_trace, dumps
from fuzz.mutate_report import EMPTY_TRACE

_QUIET_CHECKS = [HealthCheck.too_slow, HealthCheck.data_too_large,
                 HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much]  # fmt: skip
settings.register_profile(
    "ci", max_examples=15, derandomize=True, deadline=None, database=None,
    suppress_health_check=_QUIET_CHECKS, print_blob=True,
)  # fmt: skip
settings.register_profile(
    "fuzz-long", max_examples=300, deadline=None, suppress_health_check=_QUIET_CHECKS,
    print_blob=True,
)  # fmt: skip
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

#: how many examples the one-process-per-input tests draw, against the per-kind tests' count
#: (settings().max_examples): a subprocess costs ~1.3 s of interpreter start-up
SUBPROCESS_EXAMPLES = 200 if os.environ.get("HYPOTHESIS_PROFILE") == "fuzz-long" else 16


def pytest_configure(config):
    config.addinivalue_line("markers", "fuzz: property-based fuzzing of the CLI (tests/fuzz)")


@pytest.fixture(scope="session")
def fuzz_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@pytest.fixture(scope="session")
def cache_dir(fuzz_dir):
    return fuzz_dir / "membound-cache"


@pytest.fixture(scope="session")
def driver(cache_dir):
    d = Driver(cache_dir)
    yield d
    d.close()


@pytest.fixture(scope="session")
def reports(fuzz_dir, cache_dir) -> dict[str, dict]:
    """Report JSONs of the (shrunk) bases, written by `membound analyze` once per session."""
    import json

    out = {}
    for name in BASES:
        work = fuzz_dir / f"report-{name}"
        work.mkdir()
        (work / "trace.json").write_bytes(dumps(base_trace(name)))
        o = run_subprocess(
            ["analyze", "trace.json", "--json", "r.json", "--quiet"], work, cache_dir
        )
        assert not contract_violations(o, work / "r.json"), (name, o.summary())
        assert o.rc == 0, (name, o.summary())
        out[name] = json.loads((work / "r.json").read_text())
    work = fuzz_dir / "report-empty-trace"
    work.mkdir()
    (work / "trace.json").write_text('{"traceEvents": []}')
    o = run_subprocess(["analyze", "trace.json", "--json", "r.json", "--quiet"], work, cache_dir)
    if o.rc == 0 and (work / "r.json").exists():
        out[EMPTY_TRACE] = json.loads((work / "r.json").read_text())
    return out
