"""The `@triton.jit` helpers every add_norm kernel shares: the dropout keep-mask, the paired row
loads, the backward's per-row tail and the partial-row stores.

They live apart from the kernels so that each kernel module imports this one and nothing imports
back (the one-tile, chunked, SM-pair and Gluon kernels all call them; the Gluon kernel re-jits
`_row_grads` as Gluon).
"""

from __future__ import annotations

import triton
import triton.language as tl

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
