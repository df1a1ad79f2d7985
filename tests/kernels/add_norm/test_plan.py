"""Launch plans (`plan.py`): made once per problem from its spec, looked up afterwards; what a
plan fixes; and the knobs, changed only through `configure` / `configured`."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from membound.kernels.add_norm import (  # noqa: E402
    LaunchConfig,
    add_norm_bwd,
    add_norm_fwd,
    configure,
    configured,
    launch,
    plan,
)
from membound.kernels.add_norm.plan import PLANNER, BwdSpec, FwdSpec  # noqa: E402

META = torch.device("meta")


@pytest.fixture
def plans_made(monkeypatch):
    """Launch nothing; returns the list of (spec, plan) that plan_fwd / plan_bwd make."""
    made = []
    monkeypatch.setattr(launch, "launch_planned", lambda p, args: None)
    for name in ("plan_fwd", "plan_bwd"):
        real = getattr(plan, name)

        def record(key, spec, *rest, real=real):
            made.append((spec, real(key, spec, *rest)))
            return made[-1][1]

        monkeypatch.setattr(plan, name, record)
    PLANNER.plans.clear()
    yield made
    PLANNER.plans.clear()


def _problem(n=1024, rows=64, dtype=torch.bfloat16):
    x, r, dy = (torch.empty(rows, n, dtype=dtype, device=META) for _ in range(3))
    w = torch.empty(n, dtype=dtype, device=META)
    mean, rstd = (torch.empty(rows, device=META) for _ in range(2))
    return x, r, dy, w, mean, rstd


def test_a_repeated_call_is_a_plan_lookup(plans_made):
    """The spec is built and a plan made on a problem's first call only; a problem that
    differs in anything the kernels specialize on (here a row stride) gets its own."""
    x, r, dy, w, mean, rstd = _problem()

    def fwd(x=x):
        add_norm_fwd(x, w, w, r, None, eps=1e-5, is_rms=False, dropout_p=0.1, seed=1)

    def bwd():
        add_norm_bwd(dy, None, x, mean, rstd, w, is_rms=False, dropout_p=0.1, seed=1,
                     want_dweight=True, want_dbias=True, dres_dtype=dy.dtype)  # fmt: skip

    for _ in range(3):
        fwd()
        bwd()
    specs = [spec for spec, _ in plans_made]
    assert specs == [
        FwdSpec(64, 1024, META, 2, True, False, True, True, True, 0.1, False, None),
        BwdSpec(64, 1024, META, (True, True, False), 0.1, False, None, False, True, True, True),
    ]
    fwd(torch.empty(64, 2048, dtype=torch.bfloat16, device=META)[:, :1024])
    assert len(plans_made) == 3 and len(PLANNER.plans) == 3


def test_weight_held_across_tiles_only_by_persistent_programs(plans_made):
    """W_ONCE (weight and bias loaded before the loop and held) only where a program does
    several tiles: a one-tile program loads them after the statistics, in fewer registers."""
    for n, store_s, cfg in ((4096, True, None), (4096, False, LaunchConfig(1, 4096, 8, False, 0)),
                            (4096, False, LaunchConfig(2, 4096, 16, False, 2, prefetch=True)),
                            (1024, True, LaunchConfig(2, 1024, 4, False, 4))):  # fmt: skip
        x, r, _, w, _, _ = _problem(n)
        add_norm_fwd(x, w, w, r if store_s else None, None, eps=1e-5, is_rms=False,
                     store_s=store_s, config=cfg)  # fmt: skip
    assert [p.row.constexprs["W_ONCE"] for _, p in plans_made] == [False, False, True, True]


def test_knobs_reach_the_plans(plans_made):
    """Poisoned outputs (this suite's fixture), the pair kernel's spin and fallback, and the
    split backward's parameter pass come from the knobs in force when the plan is made."""
    x, r, dy, w, mean, rstd = _problem(9000, 8)

    def bwd(config=None):
        PLANNER.plans.clear()
        add_norm_bwd(dy, None, x, mean, rstd, w, is_rms=False, want_dweight=True,
                     config=config)  # fmt: skip
        return plans_made[-1][1]

    assert bwd().alloc is plan.poisoned
    with configured(poison_outputs=False, pair_spin=7, pair_fallback=2):
        bp = bwd()
        assert bp.alloc is plan.empty and bp.row.constexprs["FALLBACK"] == 2
        assert bp.extra == (0,)  # the spin is for CUDA devices; meta is none
    assert bwd().row.constexprs["FALLBACK"] == 1  # the interpreter's, on a non-CUDA device
    split = LaunchConfig(1, 64, 1, False, programs_per_sm=0, split_params=True)
    with configured(split_pass=(4, 8, 64, 2)):
        bp = bwd(split)
    assert bp.p_rows == 4 and bp.params.num_warps == 2
    assert bp.params.constexprs["BLOCK_M"] == 8 and bp.params.constexprs["BLOCK_N"] == 64


def test_configure_returns_the_previous_knobs_and_drops_the_plans(plans_made):
    x, r, _, w, _, _ = _problem()
    add_norm_fwd(x, w, w, r, None, eps=1e-5, is_rms=False)
    assert PLANNER.plans
    before = PLANNER.knobs
    previous = configure(bwd_pair=None)
    try:
        assert previous is before and PLANNER.knobs.bwd_pair is None
        assert PLANNER.knobs.poison_outputs == before.poison_outputs  # the others kept
        assert not PLANNER.plans
    finally:
        PLANNER.use(previous)
    with pytest.raises(TypeError):
        configure(no_such_knob=1)
    with pytest.raises(RuntimeError), configured(bwd_gluon=None):
        raise RuntimeError
    assert PLANNER.knobs is before  # back after the block, even when it raised
