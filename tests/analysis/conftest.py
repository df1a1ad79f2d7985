from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "data"
sys.path.insert(0, str(HERE))  # tracebuilder

import tracebuilder  # noqa: E402


@pytest.fixture
def ceilings():
    return tracebuilder.test_ceilings()


@pytest.fixture
def data_dir():
    return DATA
