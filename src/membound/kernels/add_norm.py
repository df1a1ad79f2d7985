"""Fused residual add + bias + dropout + LayerNorm/RMSNorm: Triton kernels, launchers, reference.

    s = dropout(x + pre_bias) + residual        (each part optional)
    y = norm(s) * weight + bias                 (norm = LayerNorm or RMSNorm over the last dim)

Everything is memory-bound, so the design goal is moving the minimal bytes once: the forward
reads x (and residual) and writes y (and s); the backward reads dy and s and writes dx. Math is
fp32 whatever the storage dtype. The dropout mask is never stored: it is a pure function of
(seed, row, column) through Philox, so the backward regenerates exactly the forward's mask.
Rows that fit one register tile take one pass; wider rows are processed in chunks (the
`_chunked` kernels in `add_norm_chunked.py`). Launch configurations live in `add_norm_config.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from membound.kernels import add_norm_config as _C
from membound.kernels._launch import Plan, launch_planned
from membound.kernels.add_norm_config import (
    LaunchConfig,
    _next_pow2,
    _sm_count,
    bwd_config,
    fwd_config,
    grid_size,
)

# the pure-PyTorch reference lives apart so the fallback path never imports triton
from membound.kernels.add_norm_ref import add_norm_bwd_ref, add_norm_ref, dropout_keep_ref

__all__ = [
    "add_norm_bwd",
    "add_norm_bwd_ref",
    "add_norm_fwd",
    "add_norm_ref",
    "dropout_keep_ref",
    "dropout_mask",
]


#: columns served by one Philox call: 4 values x 2 16-bit halves
COLS_PER_PHILOX = 8
#: dropout compares 16-bit random slices with p * 2**16 (p quantised to 1/65536)
DROP_BITS = 16


@triton.jit
def _dropout_keep(SEED, rows, col0, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, DROP_THRESHOLD):
    """Keep-mask for a [BLOCK_M, BLOCK_N] tile whose first column is `col0` (a multiple of 8).

    One Philox call yields four 32-bit values = eight 16-bit slices, so it is called once per
    8 columns: counter (column // 8, row), key = seed. Each 16-bit slice is compared with
    round(p * 2**16), so P(keep) = 1 - p up to 2**-17 (p is quantised to 1/65536; kept
    values are still scaled by 1/(1-p) as F.dropout does). Column 8j + 4i + 2q + h takes
    half h (0 = low) of value r[2q + i] of group j: a pure function of (seed, row, column).
    """
    c0 = (col0 // 8 + tl.arange(0, BLOCK_N // 8))[None, :] + tl.zeros([BLOCK_M, 1], tl.int32)
    c1 = rows[:, None] + tl.zeros([1, BLOCK_N // 8], tl.int32)
    c0 = c0.to(tl.uint32)
    c1 = c1.to(tl.uint32)
    zero = c0 * 0
    r0, r1, r2, r3 = tl.philox(SEED, c0, c1, zero, zero)
    r = tl.join(tl.join(r0, r1), tl.join(r2, r3))  # [M, N/8, 2, 2]
    r = tl.join(r & 0xFFFF, r >> 16)  # [M, N/8, 2, 2, 2]
    r = tl.reshape(r, (BLOCK_M, BLOCK_N))
    return r.to(tl.int32) >= DROP_THRESHOLD


@triton.jit
def _load_pair(A, B, tile, M, stride_a, stride_b, cols, col_ok, HAS_B: tl.constexpr,
               BLOCK_M: tl.constexpr):  # fmt: skip
    """Rows [tile * BLOCK_M, +BLOCK_M) of A and (if HAS_B) B, in their storage dtype; rows at
    or past M read as 0 (a prefetch past the last tile is masked off entirely). No cache
    hint: `evict_first` on these streams cost 2-4% (run 38: forward 16384 0.890 -> 0.921 of
    copy without it, 4096 0.908 -> 0.927, backward 4096 0.826 -> 0.856)."""
    rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
    rows64 = rows.to(tl.int64)
    mask = (rows < M)[:, None] & col_ok[None, :]
    a = tl.load(A + rows64[:, None] * stride_a + cols[None, :], mask=mask, other=0.0)
    if HAS_B:
        b = tl.load(B + rows64[:, None] * stride_b + cols[None, :], mask=mask, other=0.0)
    else:
        b = a
    return a, b


@triton.jit
def _row_grads(g, xhat, c_g, c_gx, rstd, keep, DS, DR, row64, cols, ok, stride_ds_row,
               stride_dr_row, drop_scale, HAS_DS: tl.constexpr, STORE_DR: tl.constexpr,
               DROPOUT: tl.constexpr, IS_RMS: tl.constexpr):  # fmt: skip
    """The columns `cols` of one row of the backward, given the row's sums (c_g = mean of g,
    c_gx = mean of g * xhat): ds (plus the incoming gradient of s, DS) is stored as
    dresidual; returns dx, ds through the dropout mask `keep` (the caller stores it)."""
    if IS_RMS:
        ds = (g - xhat * c_gx) * rstd
    else:
        ds = (g - c_g - xhat * c_gx) * rstd
    if HAS_DS:
        ds += tl.load(DS + row64 * stride_ds_row + cols, mask=ok, other=0.0).to(tl.float32)
    if STORE_DR:
        tl.store(DR + row64 * stride_dr_row + cols, ds.to(DR.dtype.element_ty), mask=ok)
    dx = ds
    if DROPOUT:
        dx = tl.where(keep, ds * drop_scale, 0.0)
    return dx


@triton.jit
def _store_partials(DW_PART, DB_PART, DPB_PART, offs, dw, db, dpb, mask, HAS_DW: tl.constexpr,
                    HAS_DB: tl.constexpr, HAS_DPB: tl.constexpr):  # fmt: skip
    """A program's partial row of each wanted parameter gradient (at `offs` in each buffer)."""
    if HAS_DW:
        tl.store(DW_PART + offs, dw, mask=mask)
    if HAS_DB:
        tl.store(DB_PART + offs, db, mask=mask)
    if HAS_DPB:
        tl.store(DPB_PART + offs, dpb, mask=mask)


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


@triton.jit
def _sum_partials_kernel(
    PART, OUT0, OUT1, OUT2, P, N,
    K: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    """OUTk[n] = sum over p of PART[k, p, n] for k < K, in a fixed order (deterministic), fp32
    accumulation, stored in each output's own dtype: the parameter gradients' one reduction
    and their casts in a single launch. Program i owns columns [i * BLOCK_N, +BLOCK_N)."""
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    for k in tl.static_range(K):
        acc = tl.zeros([BLOCK_P, BLOCK_N], tl.float32)
        for p0 in range(0, P, BLOCK_P):
            rows = p0 + tl.arange(0, BLOCK_P)
            offs = (k * P + rows).to(tl.int64)[:, None] * N + cols[None, :]
            acc += tl.load(PART + offs, mask=(rows < P)[:, None] & col_ok[None, :], other=0.0)
        total = tl.sum(acc, axis=0)
        if k == 0:
            tl.store(OUT0 + cols, total.to(OUT0.dtype.element_ty), mask=col_ok)
        elif k == 1:
            tl.store(OUT1 + cols, total.to(OUT1.dtype.element_ty), mask=col_ok)
        else:
            tl.store(OUT2 + cols, total.to(OUT2.dtype.element_ty), mask=col_ok)


@triton.jit
def _param_partials_kernel(
    DY, SRC, DX, MEAN, RSTD, PART, M, N, rows_per_prog,
    stride_dy_row, stride_src_row, stride_dx_row,
    HAS_DW: tl.constexpr, HAS_DB: tl.constexpr, HAS_DPB: tl.constexpr, IS_RMS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    """The split backward's second pass (rows too wide for the fused one's register
    accumulators): program (i, j) sums, over its `rows_per_prog` rows starting at
    j * rows_per_prog, dy * xhat (dweight), dy (dbias) and dx (dpre_bias, read back from the
    first pass) for columns [i * BLOCK_N, +BLOCK_N), and writes them to row j of each wanted
    (programs_m, N) slice of PART, in the order dweight, dbias, dpre_bias. xhat uses the
    forward's saved mean and rstd."""
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    pm = tl.program_id(1)
    r_lo = pm * rows_per_prog
    r_hi = tl.minimum(r_lo + rows_per_prog, M)
    acc_w = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    acc_b = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    acc_p = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for r0 in range(r_lo, r_hi, BLOCK_M):
        rows = r0 + tl.arange(0, BLOCK_M)
        row_ok = rows < r_hi
        rows64 = rows.to(tl.int64)
        mask = row_ok[:, None] & col_ok[None, :]
        if HAS_DW or HAS_DB:
            dy = tl.load(
                DY + rows64[:, None] * stride_dy_row + cols[None, :], mask=mask, other=0.0,
                eviction_policy="evict_first",
            ).to(tl.float32)  # fmt: skip
        if HAS_DW:
            s = tl.load(
                SRC + rows64[:, None] * stride_src_row + cols[None, :], mask=mask, other=0.0,
                eviction_policy="evict_first",
            ).to(tl.float32)  # fmt: skip
            rstd = tl.load(RSTD + rows, mask=row_ok, other=0.0)
            if IS_RMS:
                xhat = s * rstd[:, None]
            else:
                mean = tl.load(MEAN + rows, mask=row_ok, other=0.0)
                xhat = (s - mean[:, None]) * rstd[:, None]
            acc_w += dy * xhat
        if HAS_DB:
            acc_b += dy
        if HAS_DPB:
            acc_p += tl.load(
                DX + rows64[:, None] * stride_dx_row + cols[None, :], mask=mask, other=0.0,
                eviction_policy="evict_first",
            ).to(tl.float32)  # fmt: skip
    n_pm = tl.num_programs(1)
    k = 0
    if HAS_DW:
        tl.store(PART + (k * n_pm + pm).to(tl.int64) * N + cols, tl.sum(acc_w, 0), mask=col_ok)
        k += 1
    if HAS_DB:
        tl.store(PART + (k * n_pm + pm).to(tl.int64) * N + cols, tl.sum(acc_b, 0), mask=col_ok)
        k += 1
    if HAS_DPB:
        tl.store(PART + (k * n_pm + pm).to(tl.int64) * N + cols, tl.sum(acc_p, 0), mask=col_ok)


# ----------------------------------------------------------------------------- launchers


#: tests set this to fill every output with NaN before a launch, so unwritten elements fail
POISON_OUTPUTS = False
#: the SM-pair backward: reloads of the partner's exchange slots before a program computes
#: the partner's row sums itself (see add_norm_pair.py)
PAIR_SPIN = 1 << 14
#: None: the fallback for the device (a thread sums the partner's half alone on the GPU (2),
#: vectorized in the one-thread interpreter (1)); tests force 2 on the CPU
PAIR_FALLBACK = None
#: the split backward's parameter pass: row programs (x N / SPLIT_BLOCK_N column blocks),
#: rows x columns per tile, warps
SPLIT_ROW_PROGRAMS, SPLIT_BLOCK_M, SPLIT_BLOCK_N, SPLIT_WARPS = 32, 32, 128, 4
# (run 7, 32768 x 16384 bf16: 0.51 ms, 0.985 of copy for its 2 tensors; was 8, 16: 0.70 ms)


def _out(shape, dtype, device) -> torch.Tensor:
    t = torch.empty(shape, dtype=dtype, device=device)
    return t.fill_(float("nan")) if POISON_OUTPUTS and t.is_floating_point() else t


def _dropout_args(p: float) -> tuple[int, float]:
    """(threshold on 16 random bits, scale of kept values) matching F.dropout."""
    threshold = min(int(round(p * (1 << DROP_BITS))), 1 << DROP_BITS)
    scale = 0.0 if p >= 1.0 else 1.0 / (1.0 - p)
    return threshold, scale


def dropout_mask(seed: int, rows: int, cols: int, p: float, device) -> torch.Tensor:
    """The keep-mask the kernels use for (seed, p) on a rows x cols problem, as bool."""
    keep = torch.empty((rows, cols), dtype=torch.int8, device=device).fill_(-1)
    threshold, _ = _dropout_args(p)
    bm, bn = 16, 256
    grid = (triton.cdiv(rows, bm), triton.cdiv(cols, bn))
    _dropout_mask_kernel[grid](
        keep, rows, cols, keep.stride(0), seed, threshold, BLOCK_M=bm, BLOCK_N=bn
    )
    return keep.bool()


def _dt(t: torch.Tensor | None):
    return t.dtype if t is not None else None


#: launch plans per problem (shape, strides, dtypes, flags): config, grid, constexprs and the
#: direct-launch key computed once, so a repeated call costs a dict lookup, its allocations
#: and the launch itself (host time is what small and mid-size calls are made of)
_PLANS: dict = {}
_MAX_PLANS = 1024


def _plan(key, make):
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        plan = _PLANS[key] = make()
    return plan


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
    plan, threshold, scale = _plan(
        key,
        lambda: _fwd_plan(
            key, x, residual, (pre_bias, weight, bias), store_s, dropout_p, is_rms, config
        ),
    )
    dev = x.device
    y = _out((M, N), out_dtype, dev)
    s = _out((M, N), s_dtype, dev) if store_s else None
    mean = _out((0 if is_rms else M,), torch.float32, dev)
    rstd = _out((M,), torch.float32, dev)
    s_arg = s if s is not None else y
    r_arg = residual if residual is not None else x
    args = (
        x, r_arg, pre_bias if pre_bias is not None else x, weight if weight is not None else x,
        bias if bias is not None else x, y, s_arg, mean if not is_rms else rstd, rstd, M, N,
        x.stride(0), r_arg.stride(0), N, N, seed, threshold, scale, eps,
    )  # fmt: skip
    launch_planned(plan, args)
    return y, s, mean, rstd


def _fwd_plan(key, x, residual, params, store_s, dropout_p, is_rms, config):
    """(Plan, dropout threshold, scale) of a forward problem (see `add_norm_fwd`'s key);
    `params`: (pre_bias, weight, bias), each a tensor or None."""
    M, N = x.shape
    pre_bias, weight, bias = params
    el = x.element_size() if residual is None else max(x.element_size(), residual.element_size())
    streams = 2 + (residual is not None) + bool(store_s)  # row-sized tensors moved
    cfg = config or fwd_config(M, N, el, streams, is_rms)
    threshold, scale = _dropout_args(dropout_p)
    common = dict(
        HAS_R=residual is not None, HAS_PB=pre_bias is not None, HAS_W=weight is not None,
        HAS_B=bias is not None, DROPOUT=dropout_p > 0.0, IS_RMS=is_rms, STORE_S=store_s,
    )  # fmt: skip
    if cfg.chunked:
        from membound.kernels.add_norm_chunked import _add_norm_fwd_chunked_kernel as kernel
    else:
        kernel = _add_norm_fwd_kernel
        # weight and bias held across a persistent program's tiles; a program of one tile
        # loads them once either way, and loading them after the statistics frees registers
        # (sm_90, bf16 4096: fused 79 -> 64 registers per thread, LayerNorm alone 64 -> 40,
        # RMSNorm 47 -> 32), so more programs fit on an SM
        common["W_ONCE"] = cfg.block_m * cfg.block_n <= 8192 and cfg.programs_per_sm > 0
        common["BLOCK_M"] = cfg.block_m
        common["PREFETCH"] = cfg.prefetch
    common["BLOCK_N"] = cfg.block_n
    grid = (grid_size(cfg, M, x.device),)
    plan = Plan(key, kernel, grid, common, cfg.num_warps, cfg.num_stages, tuple(range(9)))
    return plan, threshold, scale


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

    def make(key, aligned=True):
        return lambda: _bwd_plan(
            key, M, N, dy.device, wants, dropout_p, is_rms, config, ds is not None,
            weight is not None, dres_dtype is not None, aligned and _gluon_ok(dy, src),
        )  # fmt: skip

    bp = _plan(key, make(key))
    if bp.gluon and (dy.data_ptr() | src.data_ptr()) & 15:
        # cp.async copies 16-byte pieces: rows that start unaligned take the pair kernel
        bp = _plan(key + ("unaligned",), make(key + ("unaligned",), aligned=False))
    dev = dy.device
    dx = _out((M, N), dx_dtype, dev)
    dr = _out((M, N), dres_dtype, dev) if dres_dtype is not None else None
    k = bp.k
    buf = None
    if k:  # one buffer for all wanted partials: each allocation costs host time
        alloc = torch.zeros if bp.in_place else _out
        buf = alloc((k, bp.p_rows, N), dtype=torch.float32, device=dev)
    parts = [None, None, None]  # the row kernel's own partial rows (not with split)
    if buf is not None and not bp.split:
        it = iter(buf.unbind(0))
        parts = [next(it) if w else None for w in wants]
    ds_arg = ds if ds is not None else dy
    dr_arg = dr if dr is not None else dx
    stat = mean if not is_rms else rstd
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
            from membound.kernels import add_norm_gluon

            add_norm_gluon.mark_broken(e)
            _PLANS.clear()
            return add_norm_bwd(
                dy, ds, src, mean, rstd, weight, is_rms=is_rms, dropout_p=dropout_p, seed=seed,
                want_dweight=want_dweight, want_dbias=want_dbias, want_dpre_bias=want_dpre_bias,
                dx_dtype=dx_dtype, dres_dtype=dres_dtype, param_dtypes=param_dtypes,
                config=config,
            )  # fmt: skip
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
    outs = [_out((N,), dt, dev) for dt, w in zip(param_dtypes, wants, strict=True) if w]
    launch_planned(bp.reduce, (buf, *(outs + [outs[0]] * (3 - k)), bp.p_rows, N))
    it = iter(outs)
    return dx, dr, *(next(it) if w else None for w in wants)


@dataclass(frozen=True)
class _BwdPlan:
    row: Plan
    params: Plan | None  # the split backward's parameter pass
    reduce: Plan | None
    k: int  # parameter gradients wanted
    p_rows: int  # partial rows per parameter
    in_place: bool  # partial buffer accumulated in place (zero-initialised)
    split: bool
    threshold: int
    scale: float
    ex_size: int  # int64 exchange slots of the paired kernel (0: not paired)
    extra: tuple  # the row kernel's trailing arguments (the paired kernel's SPIN)
    gluon: bool = False  # the row kernel is the Gluon one (`add_norm_gluon.py`)


def _gluon_ok(dy, src) -> bool:
    """The Gluon backward's input conditions that a plan's key fixes: CUDA, 16-bit dy and s
    whose rows and row strides are whole 16-byte pieces (it copies them by cp.async)."""
    return dy.device.type == "cuda" and _gluon_rows_ok(dy, src)


def _gluon_rows_ok(dy, src) -> bool:
    if dy.element_size() != 2 or src.element_size() != 2:
        return False
    return (dy.shape[1] | dy.stride(0) | src.stride(0)) % 8 == 0


def _bwd_plan(key, M, N, dev, wants, dropout_p, is_rms, config, has_ds, has_w,
              store_dr, gluon_ok=False) -> _BwdPlan:  # fmt: skip
    """Launch plans of a backward problem (see `add_norm_bwd`'s key)."""
    want_dweight, want_dbias, want_dpre_bias = wants
    cfg = config or bwd_config(M, N)
    grid = launch_grid = grid_size(cfg, M, dev)  # programs over rows: one partial row each
    ex_size, extra = 0, ()
    gluon = False
    # the Gluon backward where it measured faster than the pair kernel (runs 42-47, 32768
    # rows, GPU time): rows of exactly 16384 (dropout 0.1: 1.36 vs 1.54 ms; none: 1.23 vs
    # 1.45), and narrower rows without dropout (12288: 1.12 vs 1.30); with dropout and
    # masked columns it spills (12288: 1.61 vs 1.44)
    even = N == cfg.block_n
    if cfg.pair and config is None and gluon_ok and not want_dpre_bias and _C.BWD_GLUON:
        from membound.kernels import add_norm_gluon

        gluon = (even or dropout_p == 0.0) and add_norm_gluon.usable(dev, cfg.block_n)
    if gluon:  # one program per SM, persistent over rows
        grid = launch_grid = max(1, min(M, _sm_count(dev)))
    elif cfg.pair:  # one program per SM at most: both programs of a pair must be resident
        from membound.kernels.add_norm_pair import SLOTS_PER_PAIR

        grid = max(1, min(M, _sm_count(dev) * cfg.programs_per_sm // 2))
        launch_grid = 2 * grid
        ex_size = SLOTS_PER_PAIR * grid
        # reloads of the partner's slots (~1 us each on the H200) before a thread sums the
        # partner's half itself; the CPU interpreter runs programs one by one: no waiting
        extra = (PAIR_SPIN if dev.type == "cuda" else 0,)
    # the chunked kernel accumulates in place, the others write each partial row once
    in_place = cfg.chunked and not cfg.split_params
    k = sum(wants)
    split = cfg.split_params and k > 0
    # split: the first kernel writes dx (and dres) only; a second pass reduces the parameters
    p_rows = min(SPLIT_ROW_PROGRAMS, M) if split else grid
    threshold, scale = _dropout_args(dropout_p)
    common = dict(
        HAS_DS=has_ds, HAS_W=has_w, HAS_DW=want_dweight and not split,
        HAS_DB=want_dbias and not split, HAS_DPB=want_dpre_bias and not split,
        STORE_DR=store_dr, DROPOUT=dropout_p > 0.0, IS_RMS=is_rms,
    )  # fmt: skip
    warps = cfg.num_warps
    if gluon:
        from membound.kernels.add_norm_gluon import _add_norm_bwd_smem_kernel as kernel

        warps = _C.BWD_GLUON
        # dbias partials in shared memory only with dropout: there the Philox state would
        # push registers into spills (run 47: 1.36 vs 1.60 ms; without dropout 1.31 vs 1.22)
        common.update(BLOCK_N=cfg.block_n, NUM_WARPS=warps, EVEN=even, DB_SMEM=dropout_p > 0.0)
    elif cfg.chunked:
        from membound.kernels.add_norm_chunked import _add_norm_bwd_chunked_kernel as kernel
    elif cfg.pair:
        from membound.kernels.add_norm_pair import _add_norm_bwd_pair_kernel as kernel

        common["HALF_N"] = cfg.block_n // 2
        common["FALLBACK"] = (
            PAIR_FALLBACK if PAIR_FALLBACK is not None else 2 if dev.type == "cuda" else 1
        )
    else:
        kernel = _add_norm_bwd_kernel
        common["W_ONCE"] = cfg.block_m * cfg.block_n <= 8192
        common["BLOCK_M"] = cfg.block_m
        common["PREFETCH"] = cfg.prefetch
    if not cfg.pair:
        common["BLOCK_N"] = cfg.block_n
    paired = cfg.pair and not gluon
    row = Plan(
        key + ("row",), kernel, (launch_grid,), common, warps, cfg.num_stages,
        tuple(range(12 if paired else 11)),
    )  # fmt: skip
    params = None
    if split:
        bn = SPLIT_BLOCK_N
        params = Plan(
            key + ("params",), _param_partials_kernel, (-(-N // bn), p_rows),
            dict(HAS_DW=want_dweight, HAS_DB=want_dbias, HAS_DPB=want_dpre_bias, IS_RMS=is_rms,
                 BLOCK_M=SPLIT_BLOCK_M, BLOCK_N=bn), SPLIT_WARPS, 1, tuple(range(6)),
        )  # fmt: skip
    reduce = None
    if k:
        # ~128 programs over the columns; plain int arithmetic (triton.cdiv is a JIT
        # function: calling it on the host costs microseconds)
        block_n = min(128, max(16, _next_pow2(-(-N // 128))))
        reduce = Plan(
            key + ("reduce",), _sum_partials_kernel, (-(-N // block_n),),
            dict(K=k, BLOCK_P=32, BLOCK_N=block_n), 4, 1, tuple(range(4)),
        )  # fmt: skip
    return _BwdPlan(
        row, params, reduce, k, p_rows, in_place, split, threshold, scale, ex_size, extra, gluon
    )
