"""The cache directory resolves with or without platformdirs, and honours the override."""

from __future__ import annotations

import builtins
from pathlib import Path

from membound import _env


def test_override(monkeypatch, tmp_path):
    monkeypatch.setenv(_env.CACHE_DIR_VAR, str(tmp_path / "x"))
    assert _env.cache_dir() == tmp_path / "x"


def test_without_platformdirs(monkeypatch, tmp_path):
    # Some GPU images ship without platformdirs: the ceilings cache (and with it the
    # analysis's ceilings lookup) must still work.
    monkeypatch.delenv(_env.CACHE_DIR_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    real_import = builtins.__import__

    def no_platformdirs(name, *args, **kwargs):
        if name == "platformdirs":
            raise ImportError("no platformdirs")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_platformdirs)
    assert _env.cache_dir() == Path(tmp_path) / "membound"
