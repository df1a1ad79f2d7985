"""The cached direct launch (`membound.kernels._launch`): the fallback to the normal
`kernel[grid](...)` path when Triton internals are missing, the argument order handed to a
compiled launcher, and planned launches keyed by their caller."""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

from membound.kernels import _launch  # noqa: E402


class _FakeKernel:
    """Stands in for a JITFunction: records normal launches, returns `compiled`."""

    def __init__(self, compiled, arg_names=("A", "n", "C1", "C2")):
        self.arg_names = list(arg_names)
        self.compiled = compiled
        self.normal = []

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.normal.append((grid, args, kwargs))
            return self.compiled

        return run


class _FakeCompiled:
    def __init__(self):
        self.direct = []

    def __getitem__(self, grid):
        return lambda *args: self.direct.append((grid, args))


@pytest.fixture(autouse=True)
def _fresh():
    _launch.clear()
    yield
    _launch.clear()


def test_fallback_when_launch_returns_nothing():
    k = _FakeKernel(compiled=None)  # the interpreter, or a Triton that returns no kernel
    for _ in range(3):
        _launch.launch(k, (2,), (torch.zeros(4), 5), {"C1": 1, "C2": 2}, 4, 1)
    assert len(k.normal) == 3 and _launch.stats == {"direct": 0, "normal": 3}


def test_fallback_when_compiled_kernel_lacks_getitem():
    k = _FakeKernel(compiled=object())
    for _ in range(2):
        _launch.launch(k, (2,), (torch.zeros(4), 5), {"C1": 1, "C2": 2}, 4, 1)
    assert len(k.normal) == 2 and _launch.stats["direct"] == 0


def test_fallback_when_run_does_not_pass_all_args(monkeypatch):
    monkeypatch.setattr(_launch, "launcher_takes_all_args", lambda: False)
    k = _FakeKernel(compiled=_FakeCompiled())
    for _ in range(2):
        _launch.launch(k, (2,), (torch.zeros(4), 5), {"C1": 1, "C2": 2}, 4, 1)
    assert len(k.normal) == 2 and not k.compiled.direct


def test_direct_path_passes_all_args_in_signature_order(monkeypatch):
    monkeypatch.setattr(_launch, "launcher_takes_all_args", lambda: True)
    c = _FakeCompiled()
    k = _FakeKernel(compiled=c)
    t = torch.zeros(4)
    # constexprs given out of order: the launcher must still get signature order
    _launch.launch(k, (2,), (t, 5), {"C2": 20, "C1": 10}, 4, 1)
    _launch.launch(k, (2,), (t, 5), {"C2": 20, "C1": 10}, 4, 1)
    assert len(k.normal) == 1 and k.normal[0][2]["num_warps"] == 4
    assert c.direct == [((2, 1, 1), (t, 5, 10, 20))]
    # a new specialization (n == 1 is specialized by Triton) goes through the normal path
    _launch.launch(k, (2,), (t, 1), {"C2": 20, "C1": 10}, 4, 1)
    assert len(k.normal) == 2
    # misaligned pointer: a different key as well
    _launch.launch(k, (2,), (torch.zeros(8)[1:], 5), {"C2": 20, "C1": 10}, 4, 1)
    assert len(k.normal) == 3
    _launch.ENABLED = False
    try:
        _launch.launch(k, (2,), (t, 5), {"C2": 20, "C1": 10}, 4, 1)
    finally:
        _launch.ENABLED = True
    assert len(k.normal) == 4 and len(c.direct) == 1


def test_direct_launch_error_falls_back_and_disables(monkeypatch):
    monkeypatch.setattr(_launch, "launcher_takes_all_args", lambda: True)

    class _Broken:
        def __getitem__(self, grid):
            def run(*args):
                raise TypeError("function takes exactly 9 arguments")

            return run

    k = _FakeKernel(compiled=_Broken())
    try:
        for _ in range(3):
            _launch.launch(k, (2,), (torch.zeros(4), 5), {"C1": 1, "C2": 2}, 4, 1)
        assert len(k.normal) == 3 and not _launch.ENABLED and _launch.stats["failed"] == 1
    finally:
        _launch.ENABLED = True


def test_direct_path_refused_when_names_do_not_match(monkeypatch):
    monkeypatch.setattr(_launch, "launcher_takes_all_args", lambda: True)
    k = _FakeKernel(compiled=_FakeCompiled(), arg_names=("A", "n", "C1", "OTHER"))
    for _ in range(2):
        _launch.launch(k, (2,), (torch.zeros(4), 5), {"C1": 1, "C2": 2}, 4, 1)
    assert len(k.normal) == 2


def test_installed_triton_run_is_recognised():
    import triton

    major, minor = (int(v) for v in triton.__version__.split(".")[:2])
    if (major, minor) >= (3, 3):
        assert _launch.launcher_takes_all_args()


def test_real_kernel_under_interpreter_takes_normal_path():
    from membound.kernels.add_norm import add_norm_fwd

    x = torch.randn(3, 40)
    for _ in range(2):
        add_norm_fwd(x, None, None, None, None, eps=1e-5, is_rms=False)
    if not torch.cuda.is_available():
        assert _launch.stats == {"direct": 0, "normal": 2}


@pytest.mark.gpu
def test_gpu_direct_launch_is_taken_and_matches_normal():
    import triton

    from membound.kernels.add_norm import add_norm_bwd, add_norm_fwd

    x, r = (torch.randn(4096, 1024, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    w = torch.randn(1024, device="cuda")

    def run():
        y, s, mean, rstd = add_norm_fwd(x, w, None, r, None, eps=1e-5, is_rms=False,
                                        dropout_p=0.1, seed=5)  # fmt: skip
        dx = add_norm_bwd(y, None, s, mean, rstd, w, is_rms=False, dropout_p=0.1, seed=5,
                          want_dweight=True)  # fmt: skip
        return y, s, dx[0], dx[2]

    _launch.ENABLED = False
    try:
        want = run()
    finally:
        _launch.ENABLED = True
    run()  # first launch per key: the normal path
    got = run()
    major, minor = (int(v) for v in triton.__version__.split(".")[:2])
    if (major, minor) >= (3, 3):
        assert _launch.stats["direct"] >= 2
    for a, b in zip(got, want, strict=True):
        assert torch.equal(a, b)


def _plan(k, key=("p",), grid=(2,)):
    return _launch.Plan(key, k, grid, {"C2": 20, "C1": 10}, 4, 1, (0,))


def test_planned_launch_caches_by_the_callers_key(monkeypatch):
    monkeypatch.setattr(_launch, "launcher_takes_all_args", lambda: True)
    c = _FakeCompiled()
    k = _FakeKernel(compiled=c)
    t = torch.zeros(4)
    for _ in range(3):
        _launch.launch_planned(_plan(k), (t, 5))
    # one compile (normal), then direct calls with the constexprs in signature order
    assert len(k.normal) == 1 and c.direct == [((2, 1, 1), (t, 5, 10, 20))] * 2
    assert _launch.stats == {"direct": 2, "normal": 1}
    # another plan key is another specialization: normal path first
    _launch.launch_planned(_plan(k, key=("q",)), (t, 1))
    assert len(k.normal) == 2


def test_planned_launch_with_a_misaligned_tensor_takes_the_keyed_path(monkeypatch):
    monkeypatch.setattr(_launch, "launcher_takes_all_args", lambda: True)
    c = _FakeCompiled()
    k = _FakeKernel(compiled=c)
    aligned, odd = torch.zeros(4), torch.zeros(8)[1:]
    _launch.launch_planned(_plan(k), (aligned, 5))
    # same plan, misaligned pointer: must not reuse the aligned specialization's launcher
    _launch.launch_planned(_plan(k), (odd, 5))
    assert len(k.normal) == 2 and not c.direct
    _launch.launch_planned(_plan(k), (odd, 5))  # the generic key caches the misaligned one
    assert len(k.normal) == 2 and c.direct[-1][1][0] is odd
    _launch.launch_planned(_plan(k), (aligned, 5))
    assert c.direct[-1][1][0] is aligned and len(k.normal) == 2


def test_planned_launch_without_direct_path_always_launches_normally():
    k = _FakeKernel(compiled=None)
    for _ in range(3):
        _launch.launch_planned(_plan(k), (torch.zeros(4), 5))
    assert len(k.normal) == 3 and _launch.stats == {"direct": 0, "normal": 3}
