"""The add_norm launchers: forward and backward on 2-D (rows, hidden) views, and the dropout mask
the kernels use (tests).

Per call a launcher builds its problem's key (shape, strides, dtypes, flags), looks the plan up
(`plan.PLANNER`: made on the first call of a problem), allocates the outputs and launches: host
time is what small and mid-size calls are made of, so nothing else happens on a repeated call.
"""

from __future__ import annotations

import torch
import triton

from membound.kernels._launch import launch_planned
from membound.kernels.add_norm import gluon
from membound.kernels.add_norm.config import LaunchConfig
from membound.kernels.add_norm.plan import PLANNER, BwdPlan, BwdSpec, FwdSpec, dropout_args
from membound.kernels.add_norm.rows import _dropout_mask_kernel


def _dt(t: torch.Tensor | None):
    return t.dtype if t is not None else None


def add_norm_fwd(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    pre_bias: torch.Tensor | None,
    *,
    eps: float,
    is_rms: bool,
    dropout_p: float = 0.0,
    seed: int = 0,
    store_s: bool = True,
    s_dtype: torch.dtype | None = None,
    out_dtype: torch.dtype | None = None,
    config: LaunchConfig | None = None,
):
    """Forward on 2-D (rows, hidden) views whose last dim is contiguous (rows may be strided).

    Returns (y, s or None, mean (fp32, empty for RMSNorm), rstd (fp32)). `store_s=False` skips
    writing s when it equals x (no residual, bias or dropout): the backward then reads x.
    """
    M, N = x.shape
    s_dtype = s_dtype or x.dtype
    out_dtype = out_dtype or x.dtype
    r_stride = residual.stride(0) if residual is not None else x.stride(0)
    key = (
        "fwd", M, N, x.stride(0), r_stride, x.dtype, _dt(residual), _dt(pre_bias), _dt(weight),
        _dt(bias), s_dtype, out_dtype, store_s, is_rms, dropout_p, x.get_device(), config,
    )  # fmt: skip

    def describe():
        el = x.element_size()
        if residual is not None:
            el = max(el, residual.element_size())
        return FwdSpec(
            M, N, x.device, el, residual is not None, pre_bias is not None, weight is not None,
            bias is not None, store_s, dropout_p, is_rms, config,
        )  # fmt: skip

    fp = PLANNER.fwd(key, describe)
    alloc, dev = fp.alloc, x.device
    y = alloc((M, N), out_dtype, dev)
    s = alloc((M, N), s_dtype, dev) if store_s else None
    mean = alloc((0 if is_rms else M,), torch.float32, dev)
    rstd = alloc((M,), torch.float32, dev)
    s_arg = s if s is not None else y
    r_arg = residual if residual is not None else x
    args = (
        x, r_arg, pre_bias if pre_bias is not None else x, weight if weight is not None else x,
        bias if bias is not None else x, y, s_arg, mean if not is_rms else rstd, rstd, M, N,
        x.stride(0), r_arg.stride(0), N, N, seed, fp.threshold, fp.scale, eps,
    )  # fmt: skip
    launch_planned(fp.row, args)
    return y, s, mean, rstd


def add_norm_bwd(
    dy: torch.Tensor,
    ds: torch.Tensor | None,
    src: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight: torch.Tensor | None,
    *,
    is_rms: bool,
    dropout_p: float = 0.0,
    seed: int = 0,
    want_dweight: bool = False,
    want_dbias: bool = False,
    want_dpre_bias: bool = False,
    dx_dtype: torch.dtype | None = None,
    dres_dtype: torch.dtype | None = None,
    param_dtypes: tuple = (torch.float32,) * 3,
    config: LaunchConfig | None = None,
):
    """Backward on 2-D views: returns (dx, dres or None, dweight, dbias, dpre_bias) (None where
    not wanted). `src` is the saved s (or x when s was not stored). `dres_dtype=None` means
    dresidual is not written separately (no residual, or it equals dx). The parameter
    gradients come in `param_dtypes` (weight, bias, pre_bias), from one reduction launch."""
    M, N = dy.shape
    dx_dtype = dx_dtype or dy.dtype
    wants = (want_dweight, want_dbias, want_dpre_bias)
    key = (
        "bwd", M, N, dy.stride(0), ds.stride(0) if ds is not None else 0, src.stride(0),
        dy.dtype, _dt(ds), src.dtype, _dt(weight), dx_dtype, dres_dtype, param_dtypes, wants,
        is_rms, dropout_p, dy.get_device(), config,
    )  # fmt: skip

    def describe(gluon_rows=True):
        return BwdSpec(
            M, N, dy.device, wants, dropout_p, is_rms, config, ds is not None,
            weight is not None, dres_dtype is not None, gluon_rows and gluon.rows_ok(dy, src),
        )  # fmt: skip

    bp = PLANNER.bwd(key, describe)
    if bp.gluon and (dy.data_ptr() | src.data_ptr()) & 15:
        # cp.async copies 16-byte pieces: rows that start unaligned take the pair kernel
        bp = PLANNER.bwd(key + ("unaligned",), lambda: describe(gluon_rows=False))
    stat = mean if not is_rms else rstd
    out = _launch_bwd(bp, dy, ds, src, stat, rstd, weight, seed, dx_dtype, dres_dtype,
                      param_dtypes, wants)  # fmt: skip
    if out is None:  # the Gluon launch failed: Gluon is off for good, plan again (pair kernel)
        bp = PLANNER.bwd(key, describe)
        out = _launch_bwd(bp, dy, ds, src, stat, rstd, weight, seed, dx_dtype, dres_dtype,
                          param_dtypes, wants)  # fmt: skip
    return out


def _launch_bwd(bp: BwdPlan, dy, ds, src, stat, rstd, weight, seed, dx_dtype, dres_dtype,
                param_dtypes, wants):  # fmt: skip
    """Allocate and launch `bp` for `add_norm_bwd` (`stat`: the saved mean, or rstd for
    RMSNorm): its outputs, or None when the Gluon kernel failed (`PLANNER.gluon_failed` has
    turned it off)."""
    M, N = dy.shape
    alloc, dev = bp.alloc, dy.device
    dx = alloc((M, N), dx_dtype, dev)
    dr = alloc((M, N), dres_dtype, dev) if dres_dtype is not None else None
    k = bp.k
    buf = None
    if k:  # one buffer for all wanted partials: each allocation costs host time
        buf = bp.part_alloc((k, bp.p_rows, N), torch.float32, dev)
    parts = [None, None, None]  # the row kernel's own partial rows (not with split)
    if buf is not None and not bp.split:
        it = iter(buf.unbind(0))
        parts = [next(it) if w else None for w in wants]
    ds_arg = ds if ds is not None else dy
    dr_arg = dr if dr is not None else dx
    # the paired kernel's exchange slots: zeroed per call (stream-ordered, graph-safe)
    ex = (torch.zeros(bp.ex_size, dtype=torch.int64, device=dev),) if bp.ex_size else ()
    args = (
        dy, ds_arg, src, stat, rstd, weight if weight is not None else dy,
        dx, dr_arg, *(p if p is not None else rstd for p in parts), *ex, M, N,
        dy.stride(0), ds_arg.stride(0), src.stride(0), N, N, seed, bp.threshold, bp.scale,
        *bp.extra,
    )  # fmt: skip
    if bp.gluon:
        try:
            launch_planned(bp.row, args)
        except Exception as e:  # noqa: BLE001 - an experimental dialect: never fail for it
            PLANNER.gluon_failed(e)
            return None
    else:
        launch_planned(bp.row, args)
    if bp.params is not None:
        launch_planned(
            bp.params,
            (dy, src, dx, stat, rstd, buf, M, N, -(-M // bp.p_rows), dy.stride(0),
             src.stride(0), N),
        )  # fmt: skip
    if not k:
        return dx, dr, None, None, None
    # the one deterministic reduction of the per-program partials, one launch for all
    outs = [alloc((N,), dt, dev) for dt, w in zip(param_dtypes, wants, strict=True) if w]
    launch_planned(bp.reduce, (buf, *(outs + [outs[0]] * (3 - k)), bp.p_rows, N))
    it = iter(outs)
    return dx, dr, *(next(it) if w else None for w in wants)


def dropout_mask(seed: int, rows: int, cols: int, p: float, device) -> torch.Tensor:
    """The keep-mask the kernels use for (seed, p) on a rows x cols problem, as bool."""
    keep = torch.empty((rows, cols), dtype=torch.int8, device=device).fill_(-1)
    threshold, _ = dropout_args(p)
    bm, bn = 16, 256
    grid = (triton.cdiv(rows, bm), triton.cdiv(cols, bn))
    _dropout_mask_kernel[grid](
        keep, rows, cols, keep.stride(0), seed, threshold, BLOCK_M=bm, BLOCK_N=bn
    )
    return keep.bool()
