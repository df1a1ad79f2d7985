"""Wide-row add_norm backward in Gluon: one program per SM, rows staged in shared memory.

At N = 16384 a Triton program cannot hold a row, its prefetched successor and two N-wide
fp32 accumulators (dweight, dbias) in one SM's registers; the SM-pair kernel
(`pair.py`) splits each row between two programs instead and pays for it in
instructions. Gluon, Triton's lower-level dialect (`triton.experimental.gluon`: explicit
layouts, shared memory, cp.async), lets one program per SM do a whole row:

- rows of s and dy arrive by cp.async into two stages of shared memory (128 KB at 16384
  in 16-bit storage): row j + 1 is in flight while row j is summed (pass 1, one block
  reduction of three sums) and finished (pass 2); both passes read the row from shared
  memory, so no row is held in registers across the reduction;
- the dweight partials stay in registers; with dropout the dbias partials move to shared
  memory (the Philox state would otherwise push the registers into spills), laid out one
  8-float row per thread piece and swizzled so a warp's 16-byte accesses hit all 32 banks.

Every thread copies, reads and accumulates only its own elements (shared memory has the
registers' layout), so nothing needs a barrier beyond what the compiler inserts. The
dropout mask is the forward's bit for bit: Philox-4x32-10 with counter (column // 8, row,
0, 0) and key = seed, its eight 16-bit slices assigned to columns as
`_jit._dropout_keep` does (a thread holds whole groups of 8 columns).

Measured (H200, 32768 x 16384 bf16, GPU time; `benchmarks/add_norm/gluon.py`): dropout
0.1 1.36 ms = 0.74 of copy for the 4 tensors (pair kernel 1.54), no dropout 1.23 (1.45).

Gluon is experimental: its API moves between Triton releases (this file compiles with
3.6 to 3.9) and it has no CPU interpreter. `AVAILABLE` is False where it cannot be
imported; the plan step (`plan.py`) uses this kernel only on CUDA with enough shared memory per
block (`usable`) for rows that cp.async can copy (`rows_ok`), falls back to the pair kernel for
good if a launch fails (`plan.Planner.gluon_failed`), and GPU tests compare it against the pair
kernel and a float64 reference.
"""

from __future__ import annotations

import functools

import torch

try:  # Gluon (Triton >= 3.5); absent or changed elsewhere: the pair kernel is used instead
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.ampere import async_copy

    # cp.async of a pointer tensor into shared memory: `async_copy_global_to_shared` in
    # Triton 3.5-3.6, `async_load` from 3.7 (3.9 removed the old name)
    _cp_async = getattr(async_copy, "async_load", None) or async_copy.async_copy_global_to_shared

    from membound.kernels.add_norm import _jit

    # the per-row tail of every backward (ds, dresidual, dx through the mask), shared with the
    # Triton kernels: its operations mean the same in Gluon (layouts come from the inputs)
    _row_grads = gluon.jit(_jit._row_grads.fn)

    AVAILABLE = True
except Exception:  # noqa: BLE001 - any import problem means: not available
    AVAILABLE = False

if AVAILABLE:
    #: columns per thread per load (16 bytes of bf16) = one Philox call's 8 slices
    VEC = gl.constexpr(8)

    @gluon.jit
    def _philox(c0, c1, k0, k1):
        """Philox-4x32-10 of counter (c0, c1, 0, 0) and key (k0, k1), uint32 tensors."""
        c2 = c0 * 0
        c3 = c0 * 0
        for _ in gl.static_range(10):
            a0 = c0
            a2 = c2
            c0 = gl.umulhi(a2, 0xCD9E8D57) ^ c1 ^ k0
            c2 = gl.umulhi(a0, 0xD2511F53) ^ c3 ^ k1
            c1 = a2 * 0xCD9E8D57
            c3 = a0 * 0xD2511F53
            k0 = k0 + 0x9E3779B9
            k1 = k1 + 0xBB67AE85
        return c0, c1, c2, c3

    @gluon.jit
    def _keep(SEED, row, BLOCK_N: gl.constexpr, DROP_THRESHOLD, L: gl.constexpr,
              G: gl.constexpr):  # fmt: skip
        """Keep-mask of columns [0, BLOCK_N) of `row` in layout L (`_jit._dropout_keep`'s
        assignment: column 8j + 4i + 2q + h is half h of value 2q + i of group j). G: one
        group of 8 columns per thread and register, matching L's pieces."""
        grp = gl.arange(0, BLOCK_N // 8, layout=G).to(gl.uint32)
        seed = SEED.to(gl.uint64)
        k0 = (seed & 0xFFFFFFFF).to(gl.uint32)  # the key stays scalar (uniform registers)
        k1 = ((seed >> 32) & 0xFFFFFFFF).to(gl.uint32)
        r0, r1, r2, r3 = _philox(grp, grp * 0 + row.to(gl.uint32), k0, k1)
        r = gl.join(gl.join(r0, r1), gl.join(r2, r3))
        r = gl.join(r & 0xFFFF, r >> 16)
        r = gl.reshape(r, [BLOCK_N])
        keep = r.to(gl.int32) >= DROP_THRESHOLD
        return gl.convert_layout(keep, L, assert_trivial=True)

    @gluon.jit
    def _pieces(x, BLOCK_N: gl.constexpr, P: gl.constexpr):
        """A row in layout L as [BLOCK_N / 8, 8], one row per thread piece, in layout P (the
        same registers)."""
        return gl.convert_layout(gl.reshape(x, [BLOCK_N // VEC, VEC]), P, assert_trivial=True)

    @gluon.jit
    def _add3(a0, a1, a2, b0, b1, b2):
        return a0 + b0, a1 + b1, a2 + b2

    @gluon.jit
    def _issue_row(a_smem, b_smem, A, B, row, M, stride_a, stride_b, cols, ok):
        """Start copying `row` of A and B into shared memory (nothing past M), one commit
        group."""
        r64 = row.to(gl.int64)
        m = ok & ((cols * 0 + row) < M)
        # rows start on 16 bytes (the launcher checks strides % 8 and the base pointers);
        # Triton only knows divisibility by 16 elements from the arguments themselves
        a_off = gl.multiple_of(r64 * stride_a, 8)
        b_off = gl.multiple_of(r64 * stride_b, 8)
        _cp_async(a_smem, A + a_off + cols, mask=m)
        _cp_async(b_smem, B + b_off + cols, mask=m)
        async_copy.commit_group()

    @gluon.jit(do_not_specialize=["SEED"])
    def _add_norm_bwd_smem_kernel(
        DY, DS, SRC, MEAN, RSTD, W, DX, DR, DW_PART, DB_PART, DPB_PART,
        M, N,
        stride_dy_row, stride_ds_row, stride_src_row, stride_dx_row, stride_dr_row,
        SEED, DROP_THRESHOLD, drop_scale,
        HAS_DS: gl.constexpr, HAS_W: gl.constexpr, HAS_DW: gl.constexpr, HAS_DB: gl.constexpr,
        HAS_DPB: gl.constexpr, STORE_DR: gl.constexpr, DROPOUT: gl.constexpr,
        IS_RMS: gl.constexpr, BLOCK_N: gl.constexpr, NUM_WARPS: gl.constexpr,
        EVEN: gl.constexpr = False, DB_SMEM: gl.constexpr = False, DB_SWIZZLE: gl.constexpr = True,
    ):  # fmt: skip
        """Program p does rows p, p + P, ...; writes dx (and dresidual) per row and its
        partial rows of dweight and dbias once at the end (reduced deterministically by the
        caller's `_sum_partials_kernel`). Row sums are taken relative to the forward's saved
        mean and corrected to the mean of the stored s, as in the pair kernel. DPB_PART is
        unused (dpre_bias takes the pair kernel: a third accumulator does not fit). EVEN:
        N == BLOCK_N, no column masks (with dropout, masked rows spill)."""
        gl.static_assert(not HAS_DPB, "dpre_bias: use the pair kernel")
        L: gl.constexpr = gl.BlockedLayout([VEC], [32], [NUM_WARPS], [0])
        G: gl.constexpr = gl.BlockedLayout([1], [32], [NUM_WARPS], [0])
        P: gl.constexpr = gl.BlockedLayout([1, VEC], [32, 1], [NUM_WARPS, 1], [1, 0])
        SH: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])
        pid = gl.program_id(0)
        nprog = gl.num_programs(0)
        cols = gl.arange(0, BLOCK_N, layout=L)
        if EVEN:  # N == BLOCK_N: no column masks (32 per thread would take registers)
            ok = cols < BLOCK_N
        else:  # N % 8 == 0 (the launcher checks): whole 8-column pieces, as cp.async wants
            ok = (cols // VEC) < (N // VEC)
        dw_acc = gl.zeros([BLOCK_N], gl.float32, L)
        db_acc = gl.zeros([BLOCK_N], gl.float32, L)
        if DB_SMEM:
            # one row of 8 floats per thread piece; 16-byte halves swizzled every 4 rows so
            # that a warp's 16-byte accesses hit all 32 banks (unswizzled: 2-way conflicts)
            if DB_SWIZZLE:
                SW: gl.constexpr = gl.SwizzledSharedLayout(4, 4, 2, [1, 0])
            else:
                SW: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
            db_s = gl.allocate_shared_memory(
                gl.float32,
                [BLOCK_N // VEC, VEC],
                SW,
                gl.zeros([BLOCK_N // VEC, VEC], gl.float32, P),
            )
        # rows arrive by cp.async into two stages of shared memory: row j + 1 is in flight
        # while row j is summed (pass 1) and finished (pass 2), both passes reading it there
        s_bufs = gl.allocate_shared_memory(SRC.dtype.element_ty, [2, BLOCK_N], SH)
        dy_bufs = gl.allocate_shared_memory(DY.dtype.element_ty, [2, BLOCK_N], SH)
        _issue_row(s_bufs.index(0), dy_bufs.index(0), SRC, DY, pid, M, stride_src_row,
                   stride_dy_row, cols, ok)  # fmt: skip
        stage = 0
        for row in range(pid, M, nprog):
            _issue_row(s_bufs.index(1 - stage), dy_bufs.index(1 - stage), SRC, DY, row + nprog,
                       M, stride_src_row, stride_dy_row, cols, ok)  # fmt: skip
            async_copy.wait_group(1)  # this row's copies (each thread reads only its own)
            s_b = s_bufs.index(stage)
            dy_b = dy_bufs.index(stage)
            row64 = row.to(gl.int64)
            rstd = gl.load(RSTD + row)
            # pass 1: the row sums
            g = dy_b.load(L).to(gl.float32)
            if HAS_W:  # not the same load as pass 2's: merged, w would be held across
                g = g * gl.load(W + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(
                    gl.float32
                )
            if IS_RMS:
                tgd = gl.sum(g * s_b.load(L).to(gl.float32), axis=0)
            else:
                m0 = gl.load(MEAN + row)
                d = gl.where(ok, s_b.load(L).to(gl.float32) - m0, 0.0)
                tg, tgd, td = gl.reduce((g, g * d, d), 0, _add3)
            # pass 2: the gradients, from the staged row again, through a subview: loads of
            # the same view would be merged with pass 1's, holding the row in registers
            s = s_b.slice(0, BLOCK_N).load(L).to(gl.float32)
            dy = dy_b.slice(0, BLOCK_N).load(L).to(gl.float32)
            g = dy
            if HAS_W:
                g = dy * gl.load(W + cols, mask=ok, other=0.0).to(gl.float32)
            c_g = 0.0
            if IS_RMS:
                xhat = s * rstd
                c_gx = rstd * tgd / N
            else:
                shift = td / N  # mean of the stored s minus the saved mean (rounding only)
                xhat = gl.where(ok, (s - (m0 + shift)) * rstd, 0.0)
                c_gx = rstd * (tgd - shift * tg) / N
                c_g = tg / N
            keep = ok
            if DROPOUT:
                keep = _keep(SEED, row, BLOCK_N, DROP_THRESHOLD, L, G)
            dx = _row_grads(g, xhat, c_g, c_gx, rstd, keep, DS, DR, row64, cols, ok,
                            stride_ds_row, stride_dr_row, drop_scale, HAS_DS, STORE_DR, DROPOUT,
                            IS_RMS)  # fmt: skip
            gl.store(DX + row64 * stride_dx_row + cols, dx.to(DX.dtype.element_ty), mask=ok)
            if HAS_DW:
                dw_acc += dy * xhat
            if HAS_DB:
                if DB_SMEM:
                    db_s.store(db_s.load(P) + _pieces(dy, BLOCK_N, P))
                else:
                    db_acc += dy
            stage = 1 - stage
        async_copy.wait_group(0)  # nothing may land after the program ends
        offs = pid.to(gl.int64) * N + cols
        if HAS_DW:
            gl.store(DW_PART + offs, dw_acc, mask=ok)
        if HAS_DB:
            if DB_SMEM:
                db_acc = gl.convert_layout(
                    gl.reshape(db_s.load(P), [BLOCK_N]), L, assert_trivial=True
                )
            gl.store(DB_PART + offs, db_acc, mask=ok)


def smem_bytes(block_n: int, elem_bytes: int = 2) -> int:
    """Shared memory of one program: two stages of s and dy rows, the dbias partials, and
    ~1 KB of reduction scratch."""
    return 2 * 2 * block_n * elem_bytes + 4 * block_n + 1024


@functools.lru_cache(maxsize=16)
def usable(device: torch.device, block_n: int) -> bool:
    """True when the Gluon backward can run on `device` for rows of `block_n` 16-bit
    columns: Gluon imports, CUDA sm_80+ (cp.async), and a block may opt into enough shared
    memory (H100/H200: 227 KB; A100: 163 KB, too little at 16384)."""
    if not AVAILABLE or device.type != "cuda":
        return False
    props = torch.cuda.get_device_properties(device)
    if (props.major, props.minor) < (8, 0):
        return False
    optin = getattr(props, "shared_memory_per_block_optin", 0)
    return optin >= smem_bytes(block_n)


def rows_ok(dy: torch.Tensor, src: torch.Tensor) -> bool:
    """The input conditions a plan's key fixes: 16-bit dy and s whose rows and row strides are
    whole 16-byte pieces (cp.async copies those). Base pointers are checked per call."""
    if dy.element_size() != 2 or src.element_size() != 2:
        return False
    return (dy.shape[1] | dy.stride(0) | src.stride(0)) % 8 == 0
