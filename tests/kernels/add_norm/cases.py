"""The add_norm kernels' test problem: forward and backward through the launchers against float64
autograd of the reference, on fresh random inputs, with the kernels' own dropout mask
(regenerated through the same Philox stream by `dropout_mask`). Outputs are poisoned
(`conftest.py`: NaN before each launch) and checked finite, so unwritten elements fail."""

from __future__ import annotations

import torch

from membound.kernels.add_norm import add_norm_bwd, add_norm_fwd, add_norm_ref, dropout_mask
from membound.kernels.add_norm.plan import PLANNER

DEV = "cuda" if torch.cuda.is_available() else "cpu"
TOL = {torch.float32: 2e-4, torch.float16: 1e-2, torch.bfloat16: 5e-2}
ALL = ("residual", "pre_bias", "weight", "bias")


def close(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype, what: str) -> None:
    assert got.shape == want.shape, what
    assert torch.isfinite(got).all(), f"{what}: non-finite (unwritten?) elements"
    err = (got.double() - want.double()).abs().max().item()
    scale = max(1.0, want.abs().max().item())
    assert err <= TOL[dtype] * scale, f"{what}: max error {err:.3g} (scale {scale:.3g})"


def run_case(M, N, dtype, is_rms, parts, p, seed=1234, fwd_cfg=None, bwd_cfg=None, dev=DEV):
    """Forward and backward through the kernels vs float64 autograd; returns (mask, dx)."""
    g = torch.Generator(device="cpu").manual_seed(M * 1000 + N)

    def rnd(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(dev)

    x = rnd(M, N).to(dtype)
    res = rnd(M, N).to(dtype) if "residual" in parts else None
    pb = rnd(N, scale=0.5).to(dtype) if "pre_bias" in parts else None
    w = (1 + rnd(N, scale=0.3)).to(dtype) if "weight" in parts else None
    b = rnd(N, scale=0.3).to(dtype) if "bias" in parts else None
    store_s = res is not None or pb is not None or p > 0
    y, s, mean, rstd = add_norm_fwd(
        x, w, b, res, pb, eps=1e-5, is_rms=is_rms, dropout_p=p, seed=seed, store_s=store_s,
        config=fwd_cfg,
    )  # fmt: skip
    keep = dropout_mask(seed, M, N, p, dev) if p > 0 else None
    leaves = {
        k: t.double().requires_grad_()
        for k, t in dict(x=x, residual=res, pre_bias=pb, weight=w, bias=b).items()
        if t is not None
    }
    yr, sr, _, rstd_r = add_norm_ref(
        leaves["x"], leaves.get("weight"), leaves.get("bias"), leaves.get("residual"),
        leaves.get("pre_bias"), eps=1e-5, is_rms=is_rms, dropout_p=p, keep=keep,
        compute_dtype=torch.float64,
    )  # fmt: skip
    close(y, yr, dtype, "y")
    if store_s:
        close(s, sr, dtype, "s")
    close(rstd, rstd_r, torch.float32 if dtype == torch.float32 else dtype, "rstd")
    dy = rnd(M, N).to(dtype)
    ds = rnd(M, N).to(dtype) if store_s else None
    loss = (yr * dy.double()).sum() + ((sr * ds.double()).sum() if ds is not None else 0)
    loss.backward()
    dx, dr, dw, db, dpb = add_norm_bwd(
        dy, ds, s if store_s else x, mean, rstd, w, is_rms=is_rms, dropout_p=p, seed=seed,
        want_dweight=w is not None, want_dbias=b is not None, want_dpre_bias=pb is not None,
        dres_dtype=dtype if res is not None else None, config=bwd_cfg,
    )  # fmt: skip
    close(dx, leaves["x"].grad, dtype, "dx")
    if res is not None:
        close(dr, leaves["residual"].grad, dtype, "dresidual")
    for name, got in (("weight", dw), ("bias", db), ("pre_bias", dpb)):
        if name in leaves:
            close(got, leaves[name].grad, dtype, f"d{name}")
        else:
            assert got is None
    return keep, dx


def bwd_plans_used() -> list:
    """The backward plans made since the plans were last dropped."""
    return [bp for key, bp in PLANNER.plans.items() if key[0] == "bwd"]


def wide_rows(seed, M=4096, N=16384):
    """(s, dy, weight, mean, rstd) of a bf16 backward problem on the GPU."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    s, dy = (torch.randn(M, N, device="cuda", generator=g).bfloat16() for _ in range(2))
    w = torch.randn(N, device="cuda", generator=g).bfloat16()
    sf = s.float()
    return s, dy, w, sf.mean(1), torch.rsqrt(sf.var(1, unbiased=False) + 1e-5)


def wide_bwd(s, dy, w, mean, rstd):
    """The backward of `wide_rows`' problem (dropout 0.1, residual, weight and bias
    gradients), planned afresh."""
    PLANNER.plans.clear()
    return add_norm_bwd(dy, None, s, mean, rstd, w, is_rms=False, dropout_p=0.1, seed=5,
                        want_dweight=True, want_dbias=True, dres_dtype=torch.bfloat16)  # fmt: skip
