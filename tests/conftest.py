"""Test-suite set-up shared by every test.

Without CUDA, Triton kernels run under Triton's CPU interpreter: the switch must be set
before Triton is first imported, hence here.
"""

from __future__ import annotations

import os

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    """Never read or write the user's real ceilings cache from tests."""
    monkeypatch.setenv("MEMBOUND_CACHE_DIR", str(tmp_path / "membound-cache"))
