"""The Gluon backward (`add_norm_gluon.py`) on a machine without a GPU: which problems the
launcher gives it, and what happens when it cannot be built. Its numbers are checked on the
GPU (`test_add_norm.py`, marked gpu); its compile for sm_90 in `test_kernel_sass.py`."""

from __future__ import annotations

import pytest
import torch

from membound.kernels import add_norm as K
from membound.kernels import add_norm_config as C
from membound.kernels import add_norm_gluon as G

META = torch.device("meta")


@pytest.fixture
def planned(monkeypatch):
    """Plan backward problems on meta tensors as on an sm_90 GPU (Gluon usable unless marked
    broken), launching nothing: returns a function giving the backward plans made."""
    launched = []
    monkeypatch.setattr(K, "_gluon_ok", K._gluon_rows_ok)
    monkeypatch.setattr(G, "usable", lambda device, block_n: not G._BROKEN)
    monkeypatch.setattr(G, "_BROKEN", False)
    monkeypatch.setattr(K, "launch_planned", lambda plan, args: launched.append(plan))

    def plans(M, N, dtype=torch.bfloat16, p=0.1, stride=None, config=None, dpb=False):
        K._PLANS.clear()
        launched.clear()
        rows = torch.empty(M, stride or N, dtype=dtype, device=META)[:, :N]
        dy = torch.empty_like(rows) if stride is None else rows
        w = torch.empty(N, dtype=dtype, device=META)
        mean, rstd = (torch.empty(M, device=META) for _ in range(2))
        K.add_norm_bwd(dy, None, rows, mean, rstd, w, is_rms=False, dropout_p=p, seed=1,
                       want_dweight=True, want_dbias=True, want_dpre_bias=dpb,
                       dres_dtype=dtype, config=config)  # fmt: skip
        return [bp for key, bp in K._PLANS.items() if key[0] == "bwd"], list(launched)

    yield plans
    K._PLANS.clear()


@pytest.mark.skipif(not G.AVAILABLE, reason="this Triton has no Gluon")
def test_gluon_takes_rows_of_16384_and_narrower_ones_without_dropout(planned):
    (bp,), launched = planned(32768, 16384)
    assert bp.gluon and launched[0] is bp.row
    cx = bp.row.constexprs
    assert cx["EVEN"] and cx["DB_SMEM"] and cx["BLOCK_N"] == 16384
    assert bp.row.num_warps == cx["NUM_WARPS"] == C.BWD_GLUON
    assert bp.row.grid == (K._sm_count(META),) and bp.p_rows == K._sm_count(META)
    assert bp.ex_size == 0 and bp.extra == ()  # no pair exchange
    (bp,), _ = planned(32768, 16384, p=0.0)
    assert bp.gluon and not bp.row.constexprs["DB_SMEM"]  # dbias partials in registers
    (bp,), _ = planned(1000, 12288, p=0.0)
    assert bp.gluon and not bp.row.constexprs["EVEN"]
    (bp,), _ = planned(3, 16384)  # fewer rows than SMs (4 on meta): one program per row
    assert bp.gluon and bp.row.grid == (3,)


@pytest.mark.skipif(not G.AVAILABLE, reason="this Triton has no Gluon")
@pytest.mark.parametrize(
    "case",
    [dict(N=12288), dict(N=16384, dtype=torch.float32), dict(N=16384, dpb=True),
     dict(N=16380, p=0.0), dict(N=16384, stride=16388), dict(N=8192)],
    ids=["masked-with-dropout", "fp32", "dpre_bias", "N%8", "stride%8", "8192"],
)  # fmt: skip
def test_other_problems_keep_the_triton_kernels(planned, case):
    (bp,), _ = planned(4096, **case)
    assert not bp.gluon
    assert bp.row.kernel is not getattr(G, "_add_norm_bwd_smem_kernel", None)


def test_the_switches_and_an_explicit_config_turn_it_off(planned, monkeypatch):
    from membound.kernels.add_norm_config import bwd_config

    (bp,), _ = planned(4096, 16384, config=bwd_config(4096, 16384))
    assert not bp.gluon and bp.ex_size > 0  # the pair kernel, as configured
    monkeypatch.setattr(C, "BWD_GLUON", None)
    (bp,), _ = planned(4096, 16384)
    assert not bp.gluon and bp.ex_size > 0  # the pair kernel
    monkeypatch.setattr(C, "BWD_GLUON", 16)
    monkeypatch.setattr(C, "BWD_PAIR", None)  # the README's switch: the two-pass backward
    C.bwd_config.cache_clear()
    try:
        (bp,), _ = planned(4096, 16384)
        assert not bp.gluon and bp.split and bp.params is not None
    finally:
        C.bwd_config.cache_clear()


@pytest.mark.skipif(not G.AVAILABLE, reason="this Triton has no Gluon")
def test_a_failing_gluon_launch_warns_once_and_falls_back_for_good(planned, monkeypatch):
    real_launch = K.launch_planned

    def launch(plan, args):
        if plan.kernel is G._add_norm_bwd_smem_kernel:
            raise RuntimeError("PassManager::run failed\ndetails")
        real_launch(plan, args)

    monkeypatch.setattr(K, "launch_planned", launch)
    with pytest.warns(RuntimeWarning, match="Gluon add_norm backward failed.*PassManager"):
        plans, launched = planned(4096, 16384)
    assert G._BROKEN
    assert [bp.gluon for bp in plans] == [False]  # re-planned: the pair kernel
    assert launched[0].kernel.fn.__name__ == "_add_norm_bwd_pair_kernel"
    plans, _ = planned(4096, 16384)  # later calls: no new warning, no Gluon
    assert [bp.gluon for bp in plans] == [False]


def test_usable_needs_cuda_and_enough_shared_memory():
    assert not G.usable(torch.device("cpu"), 16384)
    # two stages of 16-bit s and dy, the dbias partials, reduction scratch
    assert G.smem_bytes(16384) == 4 * 16384 * 2 + 4 * 16384 + 1024 <= 227 * 1024
    assert G.smem_bytes(16384) > 163 * 1024  # an A100's opt-in limit: not there
