"""Wide-row add_norm backward by SM pairs: each program owns one half of its rows' columns.

At N = 16384 one program cannot hold a whole row and two N-wide fp32 accumulators
(dweight, dbias) in one SM's registers (256 KB): the one-tile kernel spills, and the split
backward (`split_params`) re-reads dy and s in a second pass. Here two programs share each
row, one per column half, so each keeps accumulators for N/2 columns and loads only its own
half: the backward moves the minimal bytes once. The row sums a LayerNorm backward needs
(sum of dy*w, of (s - mean)*dy*w, and of s - mean) are combined across the pair through a
small exchange buffer in global memory (zeroed per call): each program stores its three
partial sums, each tagged with row + 1 in the high 32 bits of an int64 slot, and spins on
volatile loads of its partner's slots until their tags match (no atomics, no flags).

The exchange is software-pipelined: in iteration j a program issues row j's loads, finishes
row j - 1 with its partner's sums (published an iteration ago) while they are in flight,
then sums and publishes row j.

Both programs of a pair normally run concurrently (the grid is at most one program per SM,
pairs have adjacent ids, dispatched together). Nothing depends on it: a thread that waits
SPIN reloads without its partner's sums computes them itself from the partner's half of the
row (more reads, the same sums up to rounding), so the kernel cannot hang, and it runs under
Triton's CPU interpreter (one program at a time: even programs fall back, odd ones find the
sums).
"""

from __future__ import annotations

import triton
import triton.language as tl

from membound.kernels.add_norm._jit import _dropout_keep, _row_grads, _store_partials


@triton.jit
def _publish(EX, base, tag, a, b, c):
    """Store a, b, c into slots base..base+2, each as (tag << 32) | float bits: every slot
    describes itself, so a reader needs no flag and no ordering between the three."""
    t = tag.to(tl.int64) << 32
    tl.store(EX + base, a.to(tl.uint32, bitcast=True).to(tl.int64) | t)
    tl.store(EX + base + 1, b.to(tl.uint32, bitcast=True).to(tl.int64) | t)
    tl.store(EX + base + 2, c.to(tl.uint32, bitcast=True).to(tl.int64) | t)


@triton.jit
def _f32(v):
    return (v & 4294967295).to(tl.uint32).to(tl.float32, bitcast=True)


@triton.jit
def _add3(a0, a1, a2, b0, b1, b2):
    return a0 + b0, a1 + b1, a2 + b2


@triton.jit
def _half_sums(S_raw, DY_raw, W, cols, m0, ok, HAS_W: tl.constexpr):
    """This half's (sum of g, sum of g*(s - m0), sum of (s - m0)), g = dy * w: one reduction
    pass (one barrier) for the three. The weight is re-read from L1: holding it costs more
    (run 20: 16 warps, 1.68 vs 1.56 ms, register spills)."""
    s = S_raw.to(tl.float32)
    g = DY_raw.to(tl.float32)
    if HAS_W:
        g = g * tl.load(W + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
    d = tl.where(ok, s - m0, 0.0)
    return tl.reduce((g, g * d, d), 0, _add3)


@triton.jit
def _load_half(A, B, row, M, stride_a, stride_b, cols, ok):
    """Raw values of this half of `row` in A and B (zeros past M). Unlike the other kernels'
    row loads these keep `evict_first`: without it the forward+backward at 16384 fell from
    0.66 to 0.64 of copy (run 39), although the backward alone did not change."""
    r64 = row.to(tl.int64)
    m = ok & ((cols * 0 + row) < M)  # a bool tensor (Triton 3.9's interpreter wants one)
    a = tl.load(A + r64 * stride_a + cols, mask=m, other=0.0, eviction_policy="evict_first")
    b = tl.load(B + r64 * stride_b + cols, mask=m, other=0.0, eviction_policy="evict_first")
    return a, b


@triton.jit
def _partner_sums(EX, slot, tag, e0, e1, e2, SRC, DY, W, row, m0, stride_src, stride_dy, cols,
                  col0, N, SPIN, HALF_N: tl.constexpr, HAS_W: tl.constexpr,
                  FALLBACK: tl.constexpr):  # fmt: skip
    """The partner's three sums of `row`: from its exchange slots (spinning up to SPIN
    reloads for them to carry `tag`), else computed here from its half of the row. Either
    way the result is right: a slot is accepted only with the exact tag, so scheduling (a
    partner not yet resident, the CPU interpreter running programs one by one) only decides
    which of the two ways is taken. e0..e2: the slots' first reads, issued by the caller
    early so their latency overlaps its work.

    Each thread spins on its own loads, so near the SPIN limit some threads of a program
    may have the partner's sums and others not: a fallback with a block-wide reduction
    (barriers) would then hang or mix partial results. On the GPU (FALLBACK 2) a thread
    that gave up therefore sums the partner's half alone, element by element (slow, only
    when a partner is not running); the interpreter (one thread, FALLBACK 1) may use the
    vectorized sums."""
    tries = 0
    while (((e0 >> 32) != tag) | ((e1 >> 32) != tag) | ((e2 >> 32) != tag)) & (tries < SPIN):
        e0 = tl.load(EX + slot, volatile=True)
        e1 = tl.load(EX + slot + 1, volatile=True)
        e2 = tl.load(EX + slot + 2, volatile=True)
        tries += 1
    og = _f32(e0)
    ogd = _f32(e1)
    od = _f32(e2)
    if FALLBACK == 1:  # one thread (the interpreter): the block reduction is safe
        if ((e0 >> 32) != tag) | ((e1 >> 32) != tag) | ((e2 >> 32) != tag):
            og, ogd, od = _sums_here(SRC, DY, W, row, m0, stride_src, stride_dy, cols, N, HAS_W)
    if FALLBACK == 2:  # GPU: each thread decides alone, so no barrier may follow
        if ((e0 >> 32) != tag) | ((e1 >> 32) != tag) | ((e2 >> 32) != tag):
            og, ogd, od = _sums_alone(SRC, DY, W, row, m0, stride_src, stride_dy, col0, N, HALF_N,
                                      HAS_W)  # fmt: skip
    return og, ogd, od


@triton.jit
def _sums_alone(SRC, DY, W, row, m0, stride_src, stride_dy, col0, N, HALF_N: tl.constexpr,
                HAS_W: tl.constexpr):  # fmt: skip
    """The partner's sums (its columns start at col0) computed by one thread, element by
    element: scalar loads and arithmetic only, no barrier."""
    r64 = row.to(tl.int64)
    sg = m0 * 0.0
    sgd = m0 * 0.0
    sd = m0 * 0.0
    for c in range(col0, tl.minimum(col0 + HALF_N, N)):
        s = tl.load(SRC + r64 * stride_src + c).to(tl.float32)
        g = tl.load(DY + r64 * stride_dy + c).to(tl.float32)
        if HAS_W:
            g = g * tl.load(W + c).to(tl.float32)
        d = s - m0
        sg += g
        sgd += g * d
        sd += d
    return sg, sgd, sd


@triton.jit
def _sums_here(SRC, DY, W, row, m0, stride_src, stride_dy, cols, N, HAS_W: tl.constexpr):
    """The partner's sums computed from its half of the row (the rare, slow way)."""
    ok = cols < N
    s_o, dy_o = _load_half(SRC, DY, row, row + 1, stride_src, stride_dy, cols, ok)
    return _half_sums(s_o, dy_o, W, cols, m0, ok, HAS_W)


@triton.jit(do_not_specialize=["SEED"])
def _add_norm_bwd_pair_kernel(
    DY, DS, SRC, MEAN, RSTD, W, DX, DR, DW_PART, DB_PART, DPB_PART, EX,
    M, N,
    stride_dy_row, stride_ds_row, stride_src_row, stride_dx_row, stride_dr_row,
    SEED, DROP_THRESHOLD, drop_scale, SPIN,
    HAS_DS: tl.constexpr, HAS_W: tl.constexpr, HAS_DW: tl.constexpr, HAS_DB: tl.constexpr,
    HAS_DPB: tl.constexpr, STORE_DR: tl.constexpr, DROPOUT: tl.constexpr, IS_RMS: tl.constexpr,
    HALF_N: tl.constexpr, FALLBACK: tl.constexpr = 1,
):  # fmt: skip
    """Program 2p + h owns columns [h * HALF_N, +HALF_N) of rows p, p + P, p + 2P, ...
    (P = programs / 2); it writes dx/dresidual for its half and its half of partial row p of
    dweight/dbias/dpre_bias. Iteration j: issue the loads of row j and of the partner's sums
    of row j - 1; wait for those sums (at most SPIN reloads, then compute them here); finish
    row j - 1 (its loads landed an iteration ago); sum and publish row j. Exchange slots of
    (pair, row j mod 4, half, sum k): pair * 32 + (j % 4) * 8 + half * 4 + k; a slot is
    rewritten 4 rows later, after the partner has read it (we have waited for the partner's
    row j - 2, which it publishes after reading our row j - 4). Sums are taken relative to
    the forward's saved mean (no cancellation when |mean| >> std) and corrected to the mean
    of the stored s."""
    pid = tl.program_id(0)
    half = pid % 2
    pair = pid // 2
    n_pairs = tl.num_programs(0) // 2
    cols = half * HALF_N + tl.arange(0, HALF_N)
    ok = cols < N
    dw_acc = tl.zeros([HALF_N], tl.float32)
    db_acc = tl.zeros([HALF_N], tl.float32)
    dpb_acc = tl.zeros([HALF_N], tl.float32)
    n_iter = tl.cdiv(M - pair, n_pairs)  # the launcher keeps pair < M
    mine = pair * 32 + half * 4
    theirs = pair * 32 + (1 - half) * 4
    other = (1 - half) * HALF_N + tl.arange(0, HALF_N)  # the partner's columns
    # prologue: row 0 loaded, summed and published
    s_p, dy_p = _load_half(SRC, DY, pair, M, stride_src_row, stride_dy_row, cols, ok)
    m0_p = 0.0
    if not IS_RMS:
        m0_p = tl.load(MEAN + pair)
    sg_p, sgd_p, sd_p = _half_sums(s_p, dy_p, W, cols, m0_p, ok, HAS_W)
    _publish(EX, mine, pair + 1, sg_p, sgd_p, sd_p)
    for j in range(1, n_iter + 1):
        prow = pair + (j - 1) * n_pairs  # finished this iteration
        crow = prow + n_pairs  # loaded, summed and published (if j < n_iter)
        s_c, dy_c = _load_half(SRC, DY, crow, M, stride_src_row, stride_dy_row, cols, ok)
        slot = theirs + ((j - 1) % 4) * 8
        e0 = tl.load(EX + slot, volatile=True)
        e1 = tl.load(EX + slot + 1, volatile=True)
        e2 = tl.load(EX + slot + 2, volatile=True)
        if DROPOUT:  # row j - 1's mask now: its Philox rounds overlap the loads in flight
            rows = tl.zeros([1], tl.int32) + prow
            keep = tl.reshape(
                _dropout_keep(SEED, rows, half * HALF_N, 1, HALF_N, DROP_THRESHOLD), (HALF_N,)
            )
        og, ogd, od = _partner_sums(
            EX, slot, (prow + 1).to(tl.int64), e0, e1, e2, SRC, DY, W, prow, m0_p,
            stride_src_row, stride_dy_row, other, (1 - half) * HALF_N, N, SPIN, HALF_N, HAS_W,
            FALLBACK,
        )  # fmt: skip
        tg = sg_p + og
        tgd = sgd_p + ogd
        td = sd_p + od
        # finish row j - 1
        prow64 = prow.to(tl.int64)
        rstd = tl.load(RSTD + prow)
        if IS_RMS:
            mean = 0.0
            c_gx = rstd * tgd / N
        else:
            shift = td / N  # mean of the stored s minus the saved mean (rounding only)
            mean = m0_p + shift
            c_gx = rstd * (tgd - shift * tg) / N
        c_g = tg / N
        s = s_p.to(tl.float32)
        dy = dy_p.to(tl.float32)
        xhat = tl.where(ok, (s - mean) * rstd, 0.0)
        g = dy
        if HAS_W:
            w = tl.load(W + cols, mask=ok, other=0.0, eviction_policy="evict_last")
            g = dy * w.to(tl.float32)
        if HAS_DW:
            dw_acc += dy * xhat
        if HAS_DB:
            db_acc += dy
        if not DROPOUT:
            keep = ok
        dx = _row_grads(g, xhat, c_g, c_gx, rstd, keep, DS, DR, prow64, cols, ok,
                        stride_ds_row, stride_dr_row, drop_scale, HAS_DS, STORE_DR, DROPOUT,
                        IS_RMS)  # fmt: skip
        if HAS_DPB:
            dpb_acc += tl.where(ok, dx, 0.0)
        tl.store(DX + prow64 * stride_dx_row + cols, dx.to(DX.dtype.element_ty), mask=ok)
        # row j: its sums, published for the partner
        sg_c, sgd_c, sd_c, m0_c = sg_p, sgd_p, sd_p, m0_p
        if j < n_iter:
            if not IS_RMS:
                m0_c = tl.load(MEAN + crow)
            sg_c, sgd_c, sd_c = _half_sums(s_c, dy_c, W, cols, m0_c, ok, HAS_W)
            _publish(EX, mine + (j % 4) * 8, crow + 1, sg_c, sgd_c, sd_c)
        s_p, dy_p, m0_p = s_c, dy_c, m0_c
        sg_p, sgd_p, sd_p = sg_c, sgd_c, sd_c
    _store_partials(DW_PART, DB_PART, DPB_PART, pair.to(tl.int64) * N + cols, dw_acc, db_acc,
                    dpb_acc, ok, HAS_DW, HAS_DB, HAS_DPB)  # fmt: skip


#: int64 exchange slots per pair: 4 row parities x 2 halves x 4 (3 sums + 1 unused)
SLOTS_PER_PAIR = 32
