"""The backward's parameter-gradient reductions: the deterministic sum of per-program partial rows
(every backward), and the split backward's column-parallel parameter pass (rows too wide for
register accumulators).
"""

from __future__ import annotations

import triton
import triton.language as tl


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
