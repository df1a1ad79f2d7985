"""Every add_norm kernel test runs with poisoned outputs (NaN before each launch: an element no
kernel writes fails) and leaves the launchers' knobs and plans as it found them."""

from __future__ import annotations

import importlib.util

import pytest


@pytest.fixture(autouse=True)
def _poison():
    if importlib.util.find_spec("triton") is None:  # the reference's tests run without it
        yield
        return
    from membound.kernels.add_norm import configured

    with configured(poison_outputs=True):
        yield
