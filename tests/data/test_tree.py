"""Batch structures come apart into leaves and go back together unchanged in shape."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict, namedtuple

import torch

from membound.data.tree import flatten, is_movable, tree_map

Pair = namedtuple("Pair", ["image", "label"])


@dataclasses.dataclass
class Sample:
    image: torch.Tensor
    label: torch.Tensor
    name: str = "x"


@dataclasses.dataclass(frozen=True)
class Frozen:
    image: torch.Tensor
    hidden: int = dataclasses.field(default=7, init=False)


class Movable:
    def __init__(self, t):
        self.t = t

    def to(self, *a, **k):
        return Movable(self.t.to(*a, **k))

    def pin_memory(self):
        return self


def test_structures_round_trip_with_new_leaves():
    t = [torch.full((2,), float(i)) for i in range(4)]
    batch = {
        "a": (t[0], [t[1], 3, "s"]),
        "b": Pair(t[2], None),
        "c": OrderedDict(z=t[3]),
    }
    leaves, rebuild = flatten(batch)
    assert len(leaves) == 4 and all(x is y for x, y in zip(leaves, t, strict=True))
    out = rebuild([x + 10 for x in leaves])
    assert type(out["b"]) is Pair and out["b"].label is None
    assert type(out["c"]) is OrderedDict
    assert out["a"][1][1:] == [3, "s"]
    assert torch.equal(out["a"][0], t[0] + 10) and torch.equal(out["c"]["z"], t[3] + 10)
    assert torch.equal(batch["a"][0], t[0])  # input untouched


def test_dataclasses_including_frozen_and_init_false():
    s = Sample(torch.ones(2), torch.zeros(1), "n")
    out = tree_map(lambda x: x * 2, s)
    assert (
        isinstance(out, Sample)
        and out.name == "n"
        and torch.equal(out.image, torch.full((2,), 2.0))
    )
    f = Frozen(torch.ones(3))
    out = tree_map(lambda x: x + 1, f)
    assert (
        isinstance(out, Frozen)
        and out.hidden == 7
        and torch.equal(out.image, torch.full((3,), 2.0))
    )
    assert torch.equal(f.image, torch.ones(3))


def test_movable_objects_are_leaves():
    m = Movable(torch.ones(2))
    leaves, rebuild = flatten((m, torch.zeros(1)))
    assert leaves[0] is m and is_movable(m) and not is_movable(torch.ones(1))
    assert rebuild(["X", "Y"]) == ("X", "Y")


def test_bare_tensor_and_non_tensor_batches():
    t = torch.arange(3)
    assert torch.equal(tree_map(lambda x: x + 1, t), t + 1)
    assert tree_map(lambda x: x, 5) == 5
    assert flatten("text")[0] == []


def _garbage_after(fn):
    """What `fn` leaves to the cyclic garbage collector (objects freed only by a collection)."""
    import gc

    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        fn()
        gc.collect()
        return list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()


def test_flatten_leaves_no_reference_cycle_holding_the_leaves():
    # The prefetcher flattens every batch; its device tensors must be freed when the user
    # drops them, not by a later collection that may run in a forked DataLoader worker.
    import weakref

    refs = []

    def use():
        batch = {"a": (torch.ones(3), [torch.zeros(2)]), "s": Sample(torch.ones(1), torch.ones(1))}
        leaves, rebuild = flatten(batch)
        refs.extend(weakref.ref(t) for t in leaves)
        rebuild([t + 1 for t in leaves])
        tree_map(lambda t: t * 2, batch)

    garbage = _garbage_after(use)
    assert not [o for o in garbage if isinstance(o, torch.Tensor)]
    assert len(refs) == 4 and all(r() is None for r in refs)
