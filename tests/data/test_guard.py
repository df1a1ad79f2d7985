"""strict_copies: the decision logic with fakes, the wrappers, activation and restore."""

from __future__ import annotations

import itertools
import threading
import warnings
from types import SimpleNamespace

import pytest
import torch

from membound.data import PageableCopy, PageableCopyWarning, strict_copies
from membound.data import guard as g
from membound.errors import BadInput


@pytest.mark.parametrize(
    "src, dst, nb, pinned",
    list(
        itertools.product(
            ["cpu", "cuda"], ["cpu", "cuda", "meta", None], [False, True], [False, True]
        )
    ),
)
def test_decision_table(src, dst, nb, pinned):
    asked = []

    def is_pinned():
        asked.append(1)
        return pinned

    fires = g.is_pageable_async_h2d(src, dst, nb, is_pinned)
    expected = src == "cpu" and dst == "cuda" and nb and not pinned
    assert fires is expected
    # Asking whether memory is pinned is only done for a non_blocking host->device copy.
    assert bool(asked) == (src == "cpu" and dst == "cuda" and nb)


T = torch.zeros(1)


@pytest.mark.parametrize(
    "args, kwargs, expected",
    [
        (("cuda",), {}, ("cuda", False)),
        (("cuda",), {"non_blocking": True}, ("cuda", True)),
        (("cuda:1", torch.float16, True), {}, ("cuda", True)),
        (("cuda", None, True), {}, ("cuda", True)),
        (("cuda", True), {}, ("cuda", True)),
        ((0,), {"non_blocking": True}, ("cuda", True)),
        ((torch.device("cpu"), torch.float16, True), {}, ("cpu", True)),
        ((torch.float16, True), {}, (None, True)),
        ((torch.float16,), {}, (None, False)),
        ((T, True), {}, ("cpu", True)),
        ((), {"device": "cuda", "dtype": torch.float16, "non_blocking": True}, ("cuda", True)),
        ((), {"dtype": torch.float16}, (None, False)),
    ],
)
def test_parse_to_args(args, kwargs, expected):
    assert g.parse_to_args(args, kwargs) == expected


def test_parse_cuda_args():
    assert g.parse_cuda_args((), {}) == ("cuda", False)
    assert g.parse_cuda_args((0, True), {}) == ("cuda", True)
    assert g.parse_cuda_args((), {"non_blocking": True}) == ("cuda", True)


def _fake(device="cpu", pinned=False):
    return SimpleNamespace(device=torch.device(device), is_pinned=lambda: pinned)


def test_wrappers_warn_once_per_site_with_the_user_line():
    calls = []
    to = g._wrap_to(lambda self, *a, **k: calls.append((a, k)))
    cuda = g._wrap_cuda(lambda self, *a, **k: calls.append((a, k)))
    copy_ = g._wrap_copy_(lambda self, *a, **k: calls.append((a, k)))
    with strict_copies() as guard, warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(3):
            to(_fake(), "cuda", non_blocking=True)  # one site, three times
        line = test_wrappers_warn_once_per_site_with_the_user_line.__code__.co_firstlineno
        to(_fake(pinned=True), "cuda", non_blocking=True)  # pinned: fine
        to(_fake(), "cuda")  # blocking: honest
        cuda(_fake(), non_blocking=True)
        copy_(_fake("cuda"), _fake(), True)
        copy_(_fake("cuda"), _fake(pinned=True), non_blocking=True)
    assert len(calls) == 8  # the original always runs
    msgs = [x for x in w if issubclass(x.category, PageableCopyWarning)]
    assert len(msgs) == 3
    assert {m.filename for m in msgs} == {__file__}
    assert "Tensor.to" in str(msgs[0].message) and "pin_memory" in str(msgs[0].message)
    assert "Tensor.cuda" in str(msgs[1].message) and "Tensor.copy_" in str(msgs[2].message)
    assert all(m.lineno > line for m in msgs)
    assert sorted(guard.sites.values()) == [1, 1, 3]


def test_raise_mode_raises_badinput_subclass():
    to = g._wrap_to(lambda self, *a, **k: None)
    with strict_copies("raise"), pytest.raises(PageableCopy) as info:
        to(_fake(), "cuda", non_blocking=True)
    assert isinstance(info.value, BadInput) and __file__ in str(info.value)


def test_patches_only_while_active_and_nesting_restores():
    originals = {n: torch.Tensor.__dict__.get(n) for n in ("to", "cuda", "copy_")}
    before = torch.Tensor.to
    assert not g.is_patched()
    with strict_copies("warn") as outer:
        assert torch.Tensor.to is not before and g.is_patched()
        with strict_copies("raise") as inner:
            assert g._current() is inner
        assert g._current() is outer and g.is_patched()
        # Real tensors still behave: a CPU->CPU non_blocking copy is not a transfer.
        x = torch.arange(4.0).to("cpu", non_blocking=True)
        assert torch.equal(torch.empty(4).copy_(x, non_blocking=True), x)
    assert not g.is_patched() and g._current() is None
    assert {n: torch.Tensor.__dict__.get(n) for n in originals} == originals
    assert torch.Tensor.to is before


def test_restored_after_an_exception_and_visible_from_other_threads():
    seen = []
    with pytest.raises(KeyError), strict_copies():
        t = threading.Thread(target=lambda: seen.append(g._current()))
        t.start()
        t.join()
        raise KeyError("x")
    assert seen[0] is not None and not g.is_patched()


def test_bad_mode():
    with pytest.raises(BadInput, match="mode"):
        with strict_copies("loud"):
            pass
