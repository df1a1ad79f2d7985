"""Measured ceilings are cached per device identity and re-used; --refresh re-measures."""

from __future__ import annotations

import json

import pytest

from membound.device import cache, ceilings_for_name, get_ceilings
from membound.device import measure as measure_mod
from membound.device.ceilings import Ceilings, Transfer
from membound.device.lookup import device_key


def _sample(key: dict) -> Ceilings:
    return Ceilings(
        device="cuda",
        name=key["name"],
        memory_bandwidth=4.2e12,
        read_bandwidth=3.9e12,
        flops={"bf16": 7.5e14, "fp32": 5.1e13},
        transfers=[Transfer("h2d", "pageable", True, 256 << 20, 8.1e9, 0.998)],
        key=key,
        measured_at="2026-01-01T00:00:00+00:00",
        seconds=12.5,
    )


def test_round_trip_is_lossless():
    key = {
        "device": "cuda",
        "name": "NVIDIA H200",
        "driver": 13000,
        "torch": "2.11",
        "quick": False,
    }
    original = _sample(key)
    path = cache.save(original)
    assert path.exists() and path.parent == cache.cache_dir()
    assert cache.load(key) == original
    assert json.loads(path.read_text())["transfers"][0]["host_blocked_fraction"] == 0.998


def test_other_identity_misses():
    key = {
        "device": "cuda",
        "name": "NVIDIA H200",
        "driver": 13000,
        "torch": "2.11",
        "quick": False,
    }
    cache.save(_sample(key))
    assert cache.load({**key, "torch": "2.12"}) is None
    assert cache.load({**key, "quick": True}) is None


def test_corrupt_file_is_ignored():
    key = {"device": "cuda", "name": "X", "torch": "1"}
    path = cache.path_for(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    assert cache.load(key) is None


def test_get_ceilings_measures_once_then_loads(monkeypatch):
    calls = []

    def fake_measure(device, name, key, *, quick=False, progress=True, sweep_order="forward"):
        calls.append(device)
        orders.append(sweep_order)
        return Ceilings(device=device, name=name, memory_bandwidth=1e10 * len(calls), key=key)

    orders = []
    monkeypatch.setattr(measure_mod, "measure", fake_measure)
    first = get_ceilings("cpu", progress=False)
    second = get_ceilings("cpu", progress=False)
    assert calls == ["cpu"] and second == first
    third = get_ceilings("cpu", progress=False, refresh=True, sweep_order="reverse")
    assert calls == ["cpu", "cpu"] and third.memory_bandwidth == 2e10
    assert orders == ["forward", "reverse"]  # the sweep order reaches the measurement
    assert get_ceilings("cpu", progress=False) == third  # refresh overwrote the cache


def test_key_names_the_device_and_versions():
    key = device_key("cpu")
    assert key["device"] == "cpu" and key["name"] and key["torch"] and key["threads"] >= 1
    assert device_key("cpu", quick=True) != key


def test_ceilings_for_name_prefers_cached_full_measurement():
    key = {"device": "cuda", "name": "NVIDIA H200", "driver": 1, "torch": "2.11", "quick": False}
    cache.save(_sample(key))
    quick = _sample({**key, "quick": True})
    quick.memory_bandwidth = 1.0
    quick.measured_at = "2027-01-01T00:00:00+00:00"
    cache.save(quick)
    c = ceilings_for_name("NVIDIA H200")
    assert c.source == "measured" and c.memory_bandwidth == pytest.approx(4.2e12)
