"""The Gluon backward (`gluon.py`): which problems the plan step gives it, what happens when it
cannot be built (without a GPU: planned on meta tensors), and its numbers (GPU, marked). Its
compile for sm_90 is checked in `test_kernel_sass.py`."""

from __future__ import annotations

import warnings

import pytest
import torch

pytest.importorskip("triton")

from membound.kernels.add_norm import (  # noqa: E402
    add_norm_bwd,
    add_norm_fwd,
    bwd_config,
    configured,
    gluon,
    launch,
)
from membound.kernels.add_norm.config import Knobs, sm_count  # noqa: E402
from membound.kernels.add_norm.plan import PLANNER  # noqa: E402

from .cases import bwd_plans_used, run_case, wide_bwd, wide_rows  # noqa: E402

META = torch.device("meta")


@pytest.fixture
def planned(monkeypatch):
    """Plan backward problems on meta tensors as on an sm_90 GPU (Gluon usable until a launch
    of it fails), launching nothing: returns a function giving (backward plans, launches)."""
    launched = []
    monkeypatch.setattr(PLANNER, "gluon_error", None)
    monkeypatch.setattr(PLANNER, "gluon_runs", lambda device, block_n: PLANNER.gluon_error is None)
    monkeypatch.setattr(launch, "launch_planned", lambda plan, args: launched.append(plan))

    def plans(M, N, dtype=torch.bfloat16, p=0.1, stride=None, config=None, dpb=False):
        PLANNER.plans.clear()
        launched.clear()
        rows = torch.empty(M, stride or N, dtype=dtype, device=META)[:, :N]
        dy = torch.empty_like(rows) if stride is None else rows
        w = torch.empty(N, dtype=dtype, device=META)
        mean, rstd = (torch.empty(M, device=META) for _ in range(2))
        add_norm_bwd(dy, None, rows, mean, rstd, w, is_rms=False, dropout_p=p, seed=1,
                     want_dweight=True, want_dbias=True, want_dpre_bias=dpb,
                     dres_dtype=dtype, config=config)  # fmt: skip
        return bwd_plans_used(), list(launched)

    yield plans
    PLANNER.plans.clear()


@pytest.mark.skipif(not gluon.AVAILABLE, reason="this Triton has no Gluon")
def test_gluon_takes_rows_of_16384_and_narrower_ones_without_dropout(planned):
    (bp,), launched = planned(32768, 16384)
    assert bp.gluon and launched[0] is bp.row
    cx = bp.row.constexprs
    assert cx["EVEN"] and cx["DB_SMEM"] and cx["BLOCK_N"] == 16384
    assert bp.row.num_warps == cx["NUM_WARPS"] == Knobs().bwd_gluon
    assert bp.row.grid == (sm_count(META),) and bp.p_rows == sm_count(META)
    assert bp.ex_size == 0 and bp.extra == ()  # no pair exchange
    (bp,), _ = planned(32768, 16384, p=0.0)
    assert bp.gluon and not bp.row.constexprs["DB_SMEM"]  # dbias partials in registers
    (bp,), _ = planned(1000, 12288, p=0.0)
    assert bp.gluon and not bp.row.constexprs["EVEN"]
    (bp,), _ = planned(3, 16384)  # fewer rows than SMs (4 on meta): one program per row
    assert bp.gluon and bp.row.grid == (3,)


@pytest.mark.skipif(not gluon.AVAILABLE, reason="this Triton has no Gluon")
@pytest.mark.parametrize(
    "case",
    [dict(N=12288), dict(N=16384, dtype=torch.float32), dict(N=16384, dpb=True),
     dict(N=16380, p=0.0), dict(N=16384, stride=16388), dict(N=8192)],
    ids=["masked-with-dropout", "fp32", "dpre_bias", "N%8", "stride%8", "8192"],
)  # fmt: skip
def test_other_problems_keep_the_triton_kernels(planned, case):
    (bp,), _ = planned(4096, **case)
    assert not bp.gluon
    assert bp.row.kernel is not getattr(gluon, "_add_norm_bwd_smem_kernel", None)


def test_the_knobs_and_an_explicit_config_turn_it_off(planned):
    (bp,), _ = planned(4096, 16384, config=bwd_config(4096, 16384))
    assert not bp.gluon and bp.ex_size > 0  # the pair kernel, as configured
    with configured(bwd_gluon=None):
        (bp,), _ = planned(4096, 16384)
        assert not bp.gluon and bp.ex_size > 0  # the pair kernel
    with configured(bwd_pair=None):  # the README's switch: the two-pass backward
        (bp,), _ = planned(4096, 16384)
        assert not bp.gluon and bp.split and bp.params is not None
    (bp,), _ = planned(4096, 16384)  # the knobs are back
    assert bp.gluon == gluon.AVAILABLE


@pytest.mark.skipif(not gluon.AVAILABLE, reason="this Triton has no Gluon")
def test_a_failing_gluon_launch_warns_once_and_falls_back_for_good(planned, monkeypatch):
    """The failed launch marks Gluon broken in the planner, warns once (at the caller of
    add_norm_bwd), re-plans that problem with the pair kernel and launches it; other plans
    (a forward's) stay cached."""
    real_launch = launch.launch_planned

    def failing(plan, args):
        if plan.kernel is gluon._add_norm_bwd_smem_kernel:
            raise RuntimeError("PassManager::run failed\ndetails")
        real_launch(plan, args)

    monkeypatch.setattr(launch, "launch_planned", failing)
    x = torch.empty(64, 1024, dtype=torch.bfloat16, device=META)
    with pytest.warns(RuntimeWarning, match="Gluon add_norm backward failed.*PassManager") as w:
        plans, launched = planned(4096, 16384)
        fwd_keys = list(PLANNER.plans)  # the forward plan made next must survive a failure
        add_norm_fwd(x, None, None, None, None, eps=1e-5, is_rms=False)
        fwd_keys = [k for k in PLANNER.plans if k not in fwd_keys]
    ours = [r for r in w if "Gluon" in str(r.message)]
    assert len(ours) == 1 and ours[0].filename == __file__
    assert PLANNER.gluon_error is not None
    assert [bp.gluon for bp in plans] == [False]  # re-planned: the pair kernel
    assert [p.kernel.fn.__name__ for p in launched[:1]] == ["_add_norm_bwd_pair_kernel"]
    assert len(fwd_keys) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PLANNER.gluon_failed(RuntimeError("again"))  # no second warning
    assert fwd_keys[0] in PLANNER.plans  # the forward plan kept
    plans, _ = planned(4096, 16384)  # later calls: no Gluon
    assert [bp.gluon for bp in plans] == [False]


def test_usable_needs_cuda_and_enough_shared_memory():
    assert not gluon.usable(torch.device("cpu"), 16384)
    # two stages of 16-bit s and dy, the dbias partials, reduction scratch
    assert gluon.smem_bytes(16384) == 4 * 16384 * 2 + 4 * 16384 + 1024 <= 227 * 1024
    assert gluon.smem_bytes(16384) > 163 * 1024  # an A100's opt-in limit: not there


def test_rows_it_can_copy():
    """16-bit rows and row strides of whole 16-byte pieces."""
    t = torch.empty(4, 16384, dtype=torch.bfloat16, device=META)
    assert gluon.rows_ok(t, t)
    assert not gluon.rows_ok(t.float(), t)
    odd = torch.empty(4, 16388, dtype=torch.bfloat16, device=META)[:, :16380]
    assert not gluon.rows_ok(odd, odd)
    assert not gluon.rows_ok(t[:, :16380], t[:, :16380])  # N % 8


# ----------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize(
    "M,N,dtype,is_rms,p,parts",
    [(2048, 16384, torch.bfloat16, False, 0.1, ("residual", "weight", "bias")),
     (300, 16384, torch.bfloat16, True, 0.1, ("residual", "weight")),
     (256, 16384, torch.float16, False, 0.1, ("residual",)),
     (1000, 12000, torch.bfloat16, False, 0.0, ("residual", "weight", "bias")),
     (33, 9000, torch.float16, False, 0.0, ("weight", "bias"))],
)  # fmt: skip
def test_gpu_gluon_backward_against_float64(M, N, dtype, is_rms, p, parts):
    """The Gluon backward (16-bit rows of 16384, and of 9000-16383 without dropout; no
    pre-bias): every gradient against float64, its dropout mask the forward's (the reference
    applies the materialised mask), rows that do not fill the 16384 columns (masked), row
    strides not divisible by 16 (9000), fewer rows than SMs, no weight or bias."""
    if not gluon.usable(torch.device("cuda"), 16384):
        pytest.skip("no Gluon or too little shared memory on this GPU")
    PLANNER.plans.clear()
    run_case(M, N, dtype, is_rms, parts, p=p, dev="cuda")
    assert [bp.gluon for bp in bwd_plans_used()] == [True]


@pytest.mark.gpu
def test_gpu_gluon_backward_agrees_with_the_pair_kernel():
    """Same inputs through the Gluon and the SM-pair backward: the same dropped elements,
    the same gradients to rounding; and rows that start unaligned take the pair kernel."""
    s, dy, w, mean, rstd = wide_rows(4)
    M, N = s.shape

    def run(dy=dy, s=s):
        out = wide_bwd(s, dy, w, mean, rstd)
        return out, [bp.gluon for bp in bwd_plans_used()]

    glu, used = run()
    if used != [True]:
        pytest.skip("the Gluon backward is not usable here")
    with configured(bwd_gluon=None):
        pair, used = run()
    assert used == [False]
    assert torch.equal(glu[0] == 0, pair[0] == 0)  # dx: the same mask
    for a, b in zip(glu, pair, strict=True):
        if a is not None:
            torch.testing.assert_close(a.float(), b.float(), rtol=2e-2, atol=2e-2)
    # one element in: every row starts 2 bytes past a 16-byte boundary
    flat_s, flat_dy = (t.new_empty(M * N + 8) for t in (s, dy))
    s_u, dy_u = (f[1 : 1 + M * N].view(M, N) for f in (flat_s, flat_dy))
    s_u.copy_(s)
    dy_u.copy_(dy)
    unaligned, _ = run(dy_u, s_u)
    assert [bp.gluon for bp in bwd_plans_used()] == [True, False]
    assert torch.equal(unaligned[0], pair[0])
