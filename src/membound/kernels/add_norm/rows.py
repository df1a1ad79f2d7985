"""The one-tile add_norm kernels: whole rows in registers, forward and backward, and the kernel
that materialises the dropout keep-mask (tests only).

    s = dropout(x + pre_bias) + residual        (each part optional)
    y = norm(s) * weight + bias                 (norm = LayerNorm or RMSNorm over the last dim)

Everything is memory-bound, so the design goal is moving the minimal bytes once: the forward
reads x (and residual) and writes y (and s); the backward reads dy and s and writes dx. Math is
fp32 whatever the storage dtype. The dropout mask is never stored: it is a pure function of
(seed, row, column) through Philox (`_jit._dropout_keep`), so the backward regenerates exactly
the forward's mask. Rows wider than one register tile take the kernels in `chunked.py`; rows of
9000-16384 the backward of `pair.py` or `gluon.py`. Launch shapes come from `config.py`.
"""

from __future__ import annotations

import triton
import triton.language as tl

from membound.kernels.add_norm._jit import _dropout_keep, _load_pair, _store_partials


# SEED is random per call: never specialize on it (seed % 16 == 0 would compile a new variant)
@triton.jit(do_not_specialize=["SEED"])
def _dropout_mask_kernel(
    KEEP, M, N, stride_keep_row, SEED, DROP_THRESHOLD, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr
):
    """Materialise the keep-mask (tests only: the real kernels never store it)."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    col0 = tl.program_id(1) * BLOCK_N
    cols = col0 + tl.arange(0, BLOCK_N)
    keep = _dropout_keep(SEED, rows, col0, BLOCK_M, BLOCK_N, DROP_THRESHOLD)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offs = rows.to(tl.int64)[:, None] * stride_keep_row + cols[None, :]
    tl.store(KEEP + offs, keep.to(tl.int8), mask=mask)


@triton.jit(do_not_specialize=["SEED"])
def _add_norm_fwd_kernel(
    X, R, PB, W, B, Y, S, MEAN, RSTD,
    M, N,
    stride_x_row, stride_r_row, stride_y_row, stride_s_row,
    SEED, DROP_THRESHOLD, drop_scale, eps,
    HAS_R: tl.constexpr, HAS_PB: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
    DROPOUT: tl.constexpr, IS_RMS: tl.constexpr, STORE_S: tl.constexpr, W_ONCE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PREFETCH: tl.constexpr = False,
):  # fmt: skip
    """One [BLOCK_M, BLOCK_N] tile of whole rows per iteration; programs stride over tiles.

    PREFETCH (persistent grids): the next tile's x and residual are loaded, in their storage
    dtype, before the current tile's reductions and stores, so a program keeps loads in flight
    while it computes (software double buffering in registers).

    With grid == number of tiles each program does one tile (the default for the forward);
    a smaller grid makes it persistent. Row offsets are int64: 32768 x 16384 elements
    overflow int32 byte offsets. Wide rows and one-tile programs (W_ONCE false) load weight
    and bias per tile after the statistics, from L1/L2: held across the loop they spill at
    N = 16384 (ptxas, sm_90a), and a one-tile program gains nothing by loading them early.
    """
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    n_tiles = tl.cdiv(M, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < N
    # parameters are read by every tile: keep them in registers, hint L2 to keep them too
    if W_ONCE:
        if HAS_W:
            w = tl.load(W + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(
                tl.float32
            )
        if HAS_B:
            b = tl.load(B + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(
                tl.float32
            )
    if HAS_PB:
        pb = tl.load(PB + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
    if PREFETCH:
        x_next, r_next = _load_pair(
            X, R, pid, M, stride_x_row, stride_r_row, cols, col_ok, HAS_R, BLOCK_M
        )
    for tile in range(pid, n_tiles, nprog):
        rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
        row_ok = rows < M
        rows64 = rows.to(tl.int64)
        mask = row_ok[:, None] & col_ok[None, :]
        if PREFETCH:
            x_raw, r_raw = x_next, r_next
            x_next, r_next = _load_pair(
                X, R, tile + nprog, M, stride_x_row, stride_r_row, cols, col_ok, HAS_R, BLOCK_M
            )
        else:
            x_raw, r_raw = _load_pair(
                X, R, tile, M, stride_x_row, stride_r_row, cols, col_ok, HAS_R, BLOCK_M
            )
        s = x_raw.to(tl.float32)
        if HAS_PB:
            s += pb[None, :]
        if DROPOUT:
            keep = _dropout_keep(SEED, rows, 0, BLOCK_M, BLOCK_N, DROP_THRESHOLD)
            s = tl.where(keep, s * drop_scale, 0.0)
        if HAS_R:
            s += r_raw.to(tl.float32)
        if STORE_S:
            s_ptrs = S + rows64[:, None] * stride_s_row + cols[None, :]
            tl.store(s_ptrs, s.to(S.dtype.element_ty), mask=mask)
        if IS_RMS:
            diff = s
            mean = tl.zeros([BLOCK_M], tl.float32)
        else:
            mean = tl.sum(s, axis=1) / N
            diff = tl.where(mask, s - mean[:, None], 0.0)
        # two-pass variance from registers: no cancellation when |mean| >> std
        var = tl.sum(diff * diff, axis=1) / N
        rstd = 1.0 / tl.sqrt(var + eps)
        y = diff * rstd[:, None]
        if not W_ONCE:
            if HAS_W:
                w = tl.load(W + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(
                    tl.float32
                )
            if HAS_B:
                b = tl.load(B + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(
                    tl.float32
                )
        if HAS_W:
            y = y * w[None, :]
        if HAS_B:
            y = y + b[None, :]
        tl.store(
            Y + rows64[:, None] * stride_y_row + cols[None, :], y.to(Y.dtype.element_ty), mask=mask
        )
        if not IS_RMS:
            tl.store(MEAN + rows, mean, mask=row_ok)
        tl.store(RSTD + rows, rstd, mask=row_ok)


@triton.jit(do_not_specialize=["SEED"])
def _add_norm_bwd_kernel(
    DY, DS, SRC, MEAN, RSTD, W, DX, DR, DW_PART, DB_PART, DPB_PART,
    M, N,
    stride_dy_row, stride_ds_row, stride_src_row, stride_dx_row, stride_dr_row,
    SEED, DROP_THRESHOLD, drop_scale,
    HAS_DS: tl.constexpr, HAS_W: tl.constexpr, HAS_DW: tl.constexpr, HAS_DB: tl.constexpr,
    HAS_DPB: tl.constexpr, STORE_DR: tl.constexpr, DROPOUT: tl.constexpr, IS_RMS: tl.constexpr,
    W_ONCE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    PREFETCH: tl.constexpr = False,
):  # fmt: skip
    """Persistent over row tiles (PREFETCH: the next tile's s and dy are loaded before the
    current tile is computed, as in the forward); each program keeps fp32 partial sums of dweight, dbias and
    dpre_bias in registers and writes them once to row `pid` of a (programs, N) buffer,
    reduced afterwards: deterministic, no atomics. For wide rows (W_ONCE false) the weight is
    re-read per tile from L1/L2 instead of held in registers next to the two N-wide
    accumulators: at N = 16384 holding it spills heavily (measured with ptxas, sm_90a)."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    n_tiles = tl.cdiv(M, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < N
    if HAS_W:
        if W_ONCE:
            w = tl.load(W + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(
                tl.float32
            )
    dw_acc = tl.zeros([BLOCK_N], tl.float32)
    db_acc = tl.zeros([BLOCK_N], tl.float32)
    dpb_acc = tl.zeros([BLOCK_N], tl.float32)
    if PREFETCH:
        s_next, dy_next = _load_pair(
            SRC, DY, pid, M, stride_src_row, stride_dy_row, cols, col_ok, True, BLOCK_M
        )
    for tile in range(pid, n_tiles, nprog):
        rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
        row_ok = rows < M
        rows64 = rows.to(tl.int64)
        mask = row_ok[:, None] & col_ok[None, :]
        if PREFETCH:
            s_raw, dy_raw = s_next, dy_next
            s_next, dy_next = _load_pair(
                SRC, DY, tile + nprog, M, stride_src_row, stride_dy_row, cols, col_ok, True,
                BLOCK_M,
            )  # fmt: skip
        else:
            s_raw, dy_raw = _load_pair(
                SRC, DY, tile, M, stride_src_row, stride_dy_row, cols, col_ok, True, BLOCK_M
            )
        s = s_raw.to(tl.float32)
        dy = dy_raw.to(tl.float32)
        rstd = tl.load(RSTD + rows, mask=row_ok, other=0.0)
        if IS_RMS:
            xhat = s * rstd[:, None]
        else:
            # the mean of the *stored* (rounded) s, not the saved one of the fp32 s: with
            # 16-bit s and a tiny variance (N = 1: var 0, rstd 1/sqrt(eps)) the rounding
            # error times rstd would pose as signal; the row is in registers, so it is free
            mean = tl.sum(s, axis=1) / N
            xhat = tl.where(mask, (s - mean[:, None]) * rstd[:, None], 0.0)
        if HAS_W:
            if not W_ONCE:
                w = tl.load(W + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(
                    tl.float32
                )
            g = dy * w[None, :]
        else:
            g = dy
        if HAS_DW:
            dw_acc += tl.sum(dy * xhat, axis=0)
        if HAS_DB:
            db_acc += tl.sum(dy, axis=0)
        c_gx = tl.sum(g * xhat, axis=1) / N
        if IS_RMS:
            ds = (g - xhat * c_gx[:, None]) * rstd[:, None]
        else:
            c_g = tl.sum(g, axis=1) / N
            ds = (g - c_g[:, None] - xhat * c_gx[:, None]) * rstd[:, None]
        if HAS_DS:
            ds += tl.load(
                DS + rows64[:, None] * stride_ds_row + cols[None, :], mask=mask, other=0.0,
                eviction_policy="evict_first",
            ).to(tl.float32)  # fmt: skip
        if STORE_DR:
            dr_ptrs = DR + rows64[:, None] * stride_dr_row + cols[None, :]
            tl.store(dr_ptrs, ds.to(DR.dtype.element_ty), mask=mask)
        dx = ds
        if DROPOUT:
            keep = _dropout_keep(SEED, rows, 0, BLOCK_M, BLOCK_N, DROP_THRESHOLD)
            dx = tl.where(keep, ds * drop_scale, 0.0)
        if HAS_DPB:
            dpb_acc += tl.sum(tl.where(mask, dx, 0.0), axis=0)
        tl.store(
            DX + rows64[:, None] * stride_dx_row + cols[None, :],
            dx.to(DX.dtype.element_ty),
            mask=mask,
        )
    _store_partials(DW_PART, DB_PART, DPB_PART, pid.to(tl.int64) * N + cols, dw_acc, db_acc,
                    dpb_acc, col_ok, HAS_DW, HAS_DB, HAS_DPB)  # fmt: skip
