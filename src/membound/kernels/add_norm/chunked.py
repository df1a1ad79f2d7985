"""Wide-row kernels for add_norm: rows longer than one register tile, processed in chunks.

Same math and the same dropout stream as `rows.py` (the keep-mask depends only on
(seed, row, column), so the chunking does not change it). The forward makes two passes over
a row: the first computes s, stores it and merges per-chunk mean/M2 (Chan et al., exact and
free of the cancellation of sum-of-squares); the second re-reads s (from L2 for a row of a
few hundred KB) and normalizes. The backward's dweight/dbias/dpre_bias partials cannot live
in registers for a wide row, so each program accumulates into its own row of the partial
buffer (read-modify-write, still deterministic: one owner per row).
"""

from __future__ import annotations

import triton
import triton.language as tl

from membound.kernels.add_norm._jit import _dropout_keep, _row_grads


@triton.jit(do_not_specialize=["SEED"])
def _add_norm_fwd_chunked_kernel(
    X, R, PB, W, B, Y, S, MEAN, RSTD,
    M, N,
    stride_x_row, stride_r_row, stride_y_row, stride_s_row,
    SEED, DROP_THRESHOLD, drop_scale, eps,
    HAS_R: tl.constexpr, HAS_PB: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
    DROPOUT: tl.constexpr, IS_RMS: tl.constexpr, STORE_S: tl.constexpr,
    BLOCK_N: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    offs = tl.arange(0, BLOCK_N)
    for row in range(pid, M, nprog):
        # pid * 0 + row: a tensor whatever the loop variable is (tl.to_tensor is not in 3.6)
        row64 = (pid * 0 + row).to(tl.int64)
        rows = tl.zeros([1], tl.int32) + row
        mean = 0.0
        m2 = 0.0
        count = 0.0
        for c0 in range(0, N, BLOCK_N):
            cols = c0 + offs
            ok = cols < N
            s = tl.load(X + row64 * stride_x_row + cols, mask=ok, other=0.0).to(tl.float32)
            if HAS_PB:
                s += tl.load(PB + cols, mask=ok, other=0.0).to(tl.float32)
            if DROPOUT:
                keep = tl.reshape(
                    _dropout_keep(SEED, rows, c0, 1, BLOCK_N, DROP_THRESHOLD), (BLOCK_N,)
                )
                s = tl.where(keep, s * drop_scale, 0.0)
            if HAS_R:
                s += tl.load(R + row64 * stride_r_row + cols, mask=ok, other=0.0).to(tl.float32)
            if STORE_S:
                tl.store(S + row64 * stride_s_row + cols, s.to(S.dtype.element_ty), mask=ok)
            n_b = tl.sum(ok.to(tl.float32), axis=0)  # valid columns in this chunk
            if IS_RMS:
                m2 += tl.sum(s * s, axis=0)
            else:
                mean_b = tl.sum(s, axis=0) / n_b
                d = tl.where(ok, s - mean_b, 0.0)
                m2_b = tl.sum(d * d, axis=0)
                total = count + n_b
                delta = mean_b - mean
                mean += delta * n_b / total
                m2 += m2_b + delta * delta * count * n_b / total
                count = total
        rstd = 1.0 / tl.sqrt(m2 / N + eps)
        if not IS_RMS:
            tl.store(MEAN + row, mean)
        tl.store(RSTD + row, rstd)
        for c0 in range(0, N, BLOCK_N):
            cols = c0 + offs
            ok = cols < N
            if STORE_S:
                s = tl.load(S + row64 * stride_s_row + cols, mask=ok, other=0.0).to(tl.float32)
            else:
                s = tl.load(X + row64 * stride_x_row + cols, mask=ok, other=0.0).to(tl.float32)
            y = (s - mean) * rstd
            if HAS_W:
                y = y * tl.load(W + cols, mask=ok, other=0.0).to(tl.float32)
            if HAS_B:
                y = y + tl.load(B + cols, mask=ok, other=0.0).to(tl.float32)
            tl.store(Y + row64 * stride_y_row + cols, y.to(Y.dtype.element_ty), mask=ok)


@triton.jit
def _chunk_inputs(SRC, DY, W, row64, cols, ok, mean, rstd, stride_src_row, stride_dy_row,
                  HAS_W: tl.constexpr):  # fmt: skip
    """dy, xhat and g = dy * weight at the columns `cols` of a row, in fp32: both passes of the
    chunked backward load them again (a row this wide does not stay in registers)."""
    s = tl.load(SRC + row64 * stride_src_row + cols, mask=ok, other=0.0).to(tl.float32)
    dy = tl.load(DY + row64 * stride_dy_row + cols, mask=ok, other=0.0).to(tl.float32)
    xhat = tl.where(ok, (s - mean) * rstd, 0.0)
    g = dy
    if HAS_W:
        g = dy * tl.load(W + cols, mask=ok, other=0.0).to(tl.float32)
    return dy, xhat, g


@triton.jit(do_not_specialize=["SEED"])
def _add_norm_bwd_chunked_kernel(
    DY, DS, SRC, MEAN, RSTD, W, DX, DR, DW_PART, DB_PART, DPB_PART,
    M, N,
    stride_dy_row, stride_ds_row, stride_src_row, stride_dx_row, stride_dr_row,
    SEED, DROP_THRESHOLD, drop_scale,
    HAS_DS: tl.constexpr, HAS_W: tl.constexpr, HAS_DW: tl.constexpr, HAS_DB: tl.constexpr,
    HAS_DPB: tl.constexpr, STORE_DR: tl.constexpr, DROPOUT: tl.constexpr, IS_RMS: tl.constexpr,
    BLOCK_N: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    offs = tl.arange(0, BLOCK_N)
    part0 = pid.to(tl.int64) * N
    for row in range(pid, M, nprog):
        # pid * 0 + row: a tensor whatever the loop variable is (tl.to_tensor is not in 3.6)
        row64 = (pid * 0 + row).to(tl.int64)
        rows = tl.zeros([1], tl.int32) + row
        rstd = tl.load(RSTD + row)
        if IS_RMS:
            mean = 0.0
        else:
            mean = tl.load(MEAN + row)
        sum_gx = 0.0
        sum_g = 0.0
        for c0 in range(0, N, BLOCK_N):
            cols = c0 + offs
            ok = cols < N
            dy, xhat, g = _chunk_inputs(SRC, DY, W, row64, cols, ok, mean, rstd, stride_src_row,
                                        stride_dy_row, HAS_W)  # fmt: skip
            sum_gx += tl.sum(g * xhat, axis=0)
            sum_g += tl.sum(g, axis=0)
        c_gx = sum_gx / N
        c_g = sum_g / N
        for c0 in range(0, N, BLOCK_N):
            cols = c0 + offs
            ok = cols < N
            dy, xhat, g = _chunk_inputs(SRC, DY, W, row64, cols, ok, mean, rstd, stride_src_row,
                                        stride_dy_row, HAS_W)  # fmt: skip
            keep = ok
            if DROPOUT:
                keep = tl.reshape(
                    _dropout_keep(SEED, rows, c0, 1, BLOCK_N, DROP_THRESHOLD), (BLOCK_N,)
                )
            dx = _row_grads(g, xhat, c_g, c_gx, rstd, keep, DS, DR, row64, cols, ok,
                            stride_ds_row, stride_dr_row, drop_scale, HAS_DS, STORE_DR,
                            DROPOUT, IS_RMS)  # fmt: skip
            tl.store(DX + row64 * stride_dx_row + cols, dx.to(DX.dtype.element_ty), mask=ok)
            if HAS_DW:
                p = DW_PART + part0 + cols
                tl.store(p, tl.load(p, mask=ok, other=0.0) + dy * xhat, mask=ok)
            if HAS_DB:
                p = DB_PART + part0 + cols
                tl.store(p, tl.load(p, mask=ok, other=0.0) + dy, mask=ok)
            if HAS_DPB:
                p = DPB_PART + part0 + cols
                tl.store(p, tl.load(p, mask=ok, other=0.0) + dx, mask=ok)
