"""`trace.sync_mode`: the switch behind `membound diagnose --sleeping-syncs`, with a stand-in
torch and CUDA driver (the real one needs a GPU; the H100 runs are in
`tests/analysis/test_host_work_2026_12_07_h100.py`)."""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

import pytest

from membound.trace import sync_mode


def _torch(available=True, initialized=False):
    cuda = SimpleNamespace(is_available=lambda: available, is_initialized=lambda: initialized)
    return SimpleNamespace(cuda=cuda)


class _Driver:
    """cuInit, cuDeviceGetCount, cuDeviceGet and cuDevicePrimaryCtxSetFlags_v2 over `n`
    devices, refusing the flag on the devices in `refuse` (with CUDA_ERROR 201)."""

    def __init__(self, n=2, refuse=(), init_rc=0):
        self.n, self.refuse, self.init_rc = n, set(refuse), init_rc
        self.flags: dict[int, int] = {}

    def cuInit(self, flags):
        return self.init_rc

    def cuDeviceGetCount(self, ref):
        ctypes.cast(ref, ctypes.POINTER(ctypes.c_int))[0] = self.n
        return 0

    def cuDeviceGet(self, ref, ordinal):
        ctypes.cast(ref, ctypes.POINTER(ctypes.c_int))[0] = 100 + ordinal
        return 0

    def cuDevicePrimaryCtxSetFlags_v2(self, dev, flags):
        if dev.value - 100 in self.refuse:
            return 201
        self.flags[dev.value - 100] = flags.value
        return 0


def test_every_device_gets_the_blocking_sync_flag():
    drv = _Driver(n=2)
    assert sync_mode.sleep_syncs(_torch(), drv) == "ok"
    assert drv.flags == {0: sync_mode.SCHED_BLOCKING_SYNC, 1: sync_mode.SCHED_BLOCKING_SYNC}


@pytest.mark.parametrize(
    "torch_, drv, says",
    [
        (_torch(available=False), _Driver(), "no CUDA device"),
        (_torch(initialized=True), _Driver(), "CUDA was initialised before the capture"),
        (_torch(), _Driver(init_rc=100), "cuInit returned 100"),
        (_torch(), _Driver(n=2, refuse={1}), "the driver refused the flag (device 1: 201)"),
        (_torch(), _Driver(n=0), "no CUDA device"),
    ],
)
def test_why_the_syncs_still_spin(torch_, drv, says):
    got = sync_mode.sleep_syncs(torch_, drv)
    assert got != "ok" and got.startswith(says)
    if says.startswith("CUDA was") or says == "no CUDA device":
        assert drv.flags == {}  # nothing set where it could not take


def test_a_meta_says_whether_the_syncs_slept():
    assert sync_mode.slept({sync_mode.META_KEY: "ok"})
    assert not sync_mode.slept({sync_mode.META_KEY: "no CUDA device"})
    assert not sync_mode.slept({}) and not sync_mode.slept(None)


def test_without_cuda_here_the_real_call_says_so():
    """On this CPU machine the real torch has no CUDA device."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is here")
    assert sync_mode.sleep_syncs() == "no CUDA device"


class _Context:
    """cuCtxGetFlags and cuCtxSetFlags of one current context whose flags start at `flags`;
    `get_rc` fails the read, `keeps` makes the driver accept a set and ignore it, `old` is a
    driver before CUDA 12.1 (no cuCtxSetFlags)."""

    def __init__(self, flags=0x10, get_rc=0, keeps=False, old=False):
        self.flags, self.get_rc, self.keeps = flags, get_rc, keeps
        self.sets: list[int] = []
        if old:
            self.cuCtxSetFlags = None

    def cuCtxGetFlags(self, ref):
        ctypes.cast(ref, ctypes.POINTER(ctypes.c_uint))[0] = self.flags
        return self.get_rc

    def cuCtxSetFlags(self, flags):
        self.sets.append(flags.value)
        if not self.keeps:
            self.flags = flags.value
        return 0


def test_a_live_context_sleeps_keeping_its_other_flags_and_is_set_back():
    """`LiveSwitch` (`--syncs sleep-profiled`): only the scheduling bits change (0x10, the
    context's other flags, stays), and `restore` sets back what it found, once."""
    ctx = _Context(flags=0x10 | 0x01)  # CU_CTX_SCHED_SPIN and another flag
    switch = sync_mode.LiveSwitch(ctx)
    assert switch.sleep() == "ok" and ctx.flags == 0x10 | sync_mode.SCHED_BLOCKING_SYNC
    assert switch.restore() == "ok" and ctx.flags == 0x11
    assert switch.restore() is None and ctx.sets == [0x14, 0x11]


@pytest.mark.parametrize(
    "ctx, says",
    [
        (_Context(old=True), "the CUDA driver has no cuCtxSetFlags"),
        (_Context(get_rc=201), "cuCtxGetFlags returned 201"),
        (_Context(keeps=True), "the context kept its scheduling flags (0x10)"),
    ],
)
def test_why_a_live_context_still_spins(ctx, says):
    switch = sync_mode.LiveSwitch(ctx)
    got = switch.sleep()
    assert got.startswith(says) and switch.saved is None
    assert switch.restore() is None


def test_which_phases_slept():
    """A meta of `--syncs sleep` before the phases were kept slept in all of them."""
    ok = {sync_mode.META_KEY: "ok"}
    assert sync_mode.slept_phases(ok) == ("unprofiled", "profiled", "after")
    both = {**ok, sync_mode.PHASES_KEY: ["slept", "profiled"]}
    assert sync_mode.slept_phases(both) == ("slept", "profiled") and sync_mode.slept(both)
    failed = {sync_mode.META_KEY: "cuCtxSetFlags returned 1", sync_mode.PHASES_KEY: None}
    assert sync_mode.slept_phases(failed) == () and not sync_mode.slept(failed)
    assert sync_mode.mode_of(True) == "sleep" and sync_mode.mode_of(None) == "spin"
    with pytest.raises(ValueError, match="no such sync mode"):
        sync_mode.mode_of("nap")
