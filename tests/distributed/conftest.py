from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    # no interconnect figures leak in from (or out to) the user's cache
    monkeypatch.setenv("MEMBOUND_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def ceilings():
    from support import tracebuilder

    return tracebuilder.test_ceilings()
