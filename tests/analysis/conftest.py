from __future__ import annotations

import pytest

from support import tracebuilder
from support.paths import FIXTURES


@pytest.fixture
def ceilings():
    return tracebuilder.test_ceilings()


@pytest.fixture
def data_dir():
    return FIXTURES
