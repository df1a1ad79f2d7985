"""Launch configurations for the add_norm kernels, chosen by shape (no autotuning in the hot path).

Chosen from GPU time alone (CUDA-graph replay, L2 flushed: `benchmarks/add_norm/sweep.py`, run 4
on the H200, bf16, 32768 rows, residual + dropout; fraction of copy bandwidth):
- Forward, rows up to 4096 wide: one tile per program (not persistent), tiles of whole rows
  holding at least `MIN_TILE_ELEMS` elements, `ELEMS_PER_THREAD` = 16 elements per thread:
  H=1024 2 rows x 4 warps 0.878, H=2048 1 x 4 warps 0.933, H=4096 1 x 8 warps 0.910 (the
  previous persistent 16-warp shape: 0.78-0.80). The hardware scheduler refills SMs better
  than a persistent loop that stalls on its own reductions.
- Forward, 8192 and 16384: one tile, 32 warps, persistent (4 / 1 programs per SM), prefetching
  the next row while this one computes (PREFETCH): 0.873 and 0.893 (one tile of 16 warps at
  8192: < 0.76; chunks of 2048 at 16384: 0.782).
- Forward, wider: the chunked kernel (`FWD_CHUNK_*`).
- Backward (each program accumulates N-wide dweight/dbias partials in registers, so it is
  persistent): 16 elements per thread, 16 warps per SM, PREFETCH: H=1024 2 rows x 4 warps x
  4/SM 0.788, H=4096 1 x 8 warps x 2/SM 0.834 (run 3 defaults without prefetch: 0.48, 0.53).
  At 16384 the row plus two fp32 accumulators fill an SM's registers: one 16-warp program
  per SM, 0.36; no variant did better (chunked, column-split, prefetch: 0.2-0.36). Rows of
  9000-16384 take the SM-pair kernel (`pair.py`; bf16 0.65-0.71 of copy for the 4
  tensors, fp32 0.59-0.69, runs 25-35): two programs per row, one per column half,
  exchanging the row sums through memory, each holding half the accumulators. On GPUs with
  enough shared memory per block, 16-bit rows of exactly 16384 (and of 9000-16383 without
  dropout) take the Gluon kernel instead (`gluon.py`, knob `bwd_gluon`: one program
  per SM, rows staged in shared memory; runs 42-47: 0.74 of copy with dropout, 0.82
  without, against the pair kernel's 0.65 and 0.69). Wider rows
  split the work (`split_params`): the chunked kernel writes dx only (two passes per row, the
  second from L2), a column-parallel pass re-reads dy and s for dweight/dbias: 6 tensor passes
  instead of 4; 0.537 at 16384 (run 9).
- A plain norm (2 streams: x in, y out) has its own shapes where they measured better
  (`LIGHT_FWD`, and `LIGHT_FWD_RMS` for RMSNorm).

The few choices a user or a test may change at run time are `Knobs` (frozen); the launchers
read the ones in force from `plan.PLANNER`, changed only through `configure` (see `plan.py`).
Nothing here reads state: every function is a function of its arguments.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

#: the forward's one-tile limit (wider rows take the chunked kernel)
FWD_FUSED_MAX_N = 16384
#: widest row (in storage bytes) for the forward's one-tile kernel: run 7 at 16384 in fp32
#: (64 KB) measured 0.59 of copy, spilling; 32 KB rows (bf16 16384, fp32 8192) 0.87-0.89
FWD_ONE_TILE_MAX_BYTES = 32768
#: chunk width of the split backward's row pass for rows wider than 8192 (run 9, H=16384:
#: 8192 x 16 warps x 2/SM 0.537 of copy for the whole backward; 4096-wide chunks 0.48-0.49;
#: the one-tile 32-warp row kernel 0.445)
BWD_SPLIT_CHUNK_N = 8192
#: (chunk width, warps, programs per SM) of the chunked forward (run 4 at H=16384:
#: 2048 x 8 x 8 0.782 of copy by GPU time, 4096 x 8 x 8 0.727, 4096 x 16 x 4 0.726)
FWD_CHUNK_N, FWD_CHUNK_WARPS, FWD_CHUNK_PPS = 2048, 8, 8
#: a tile holds at least this many elements (whole rows): 2 rows of 1024, 4 of 512, ...
MIN_TILE_ELEMS = 2048
ELEMS_PER_THREAD = 16
#: rows up to this wide may take the SM-pair backward (knob `bwd_pair`)
BWD_PAIR_MAX_N = 16384


@dataclass(frozen=True)
class LaunchConfig:
    block_m: int
    block_n: int
    num_warps: int
    chunked: bool
    #: programs per SM for a persistent grid; 0 = one tile per program
    programs_per_sm: int
    #: 1 = no software pipelining of the tile loop (it would stage loads through shared
    #: memory and cut occupancy); >1 lets a persistent program prefetch its next tile
    num_stages: int = 1
    #: one-tile kernels of a persistent grid: load the next tile while computing this one
    prefetch: bool = False
    #: backward only: the row kernel writes dx (and dresidual) without parameter
    #: accumulators; a second pass (`_param_partials_kernel`) re-reads dy and s for
    #: dweight/dbias (and dx for dpre_bias): more bytes, but no register spills
    split_params: bool = False
    #: backward only, one tile per row: two programs (on two SMs) share each row, one per
    #: column half, exchanging row sums (`add_norm_pair.py`); CUDA only
    pair: bool = False


@dataclass(frozen=True)
class Knobs:
    """The run-time choices of the add_norm launchers. Change them with
    `membound.kernels.add_norm.configure(...)` (it returns the previous knobs and drops the
    launch plans made under them) or, for a block of code, `configured(...)`."""

    #: None, or the warps of the Gluon backward (`gluon.py`: one program per SM and row, the
    #: rows staged by cp.async in shared memory, dbias partials there too) that replaces the
    #: pair kernel for 16-bit rows where it can run (CUDA with enough shared memory per block,
    #: aligned rows, no dpre_bias)
    bwd_gluon: int | None = 16
    #: None, or (warps, programs per SM) of the SM-pair backward (`pair.py`) for rows wider
    #: than 8192 up to BWD_PAIR_MAX_N (each program holds half a row and half the
    #: accumulators; None keeps the split backward). Runs 18-21, 32768 x 16384 bf16 by GPU
    #: time: 16 warps x 1/SM 1.49-1.61 ms vs the split 1.87 ms; 32 warps spill (2.0 ms). fp32
    #: rows too (runs 28-35, dropout 0.1: 2.94-3.40 ms vs the split's 3.89-4.10, although
    #: twice the registers spill some). Both persistent kernels run a second wave when other
    #: kernels hold SMs (NCCL during a DDP backward): None there (`benchmarks/add_norm/
    #: contention.py`)
    bwd_pair: tuple[int, int] | None = (16, 1)
    #: fill every output with NaN before a launch, so unwritten elements fail (tests)
    poison_outputs: bool = False
    #: the SM-pair backward: reloads of the partner's exchange slots before a program computes
    #: the partner's row sums itself (see `pair.py`)
    pair_spin: int = 1 << 14
    #: None: the fallback for the device (a thread sums the partner's half alone on the GPU
    #: (2), vectorized in the one-thread interpreter (1)); tests force 2 on the CPU
    pair_fallback: int | None = None
    #: the split backward's parameter pass: (row programs (x N / columns per tile), rows per
    #: tile, columns per tile, warps) (run 7, 32768 x 16384 bf16: 0.51 ms, 0.985 of copy for
    #: its 2 tensors; was 8, 16: 0.70 ms)
    split_pass: tuple[int, int, int, int] = (32, 32, 128, 4)


#: plain norms (2 streams) where the fused op's shape is not the best (LayerNorm alone, GPU
#: time, runs 53-54, once one-tile programs load the weight after the statistics: 4096 in
#: 40 registers), all one tile per program, not persistent: 2048 2 rows x 4 warps 0.935
#: (fused shape 0.884), 4096 2 x 8 warps 0.966 (run 9's persistent 2 x 16 warps x 2/SM +
#: prefetch 0.842; liger-kernel 0.90), 8192 1 x 8 warps 0.865 (run 9's 1 x 16 x 2/SM
#: 0.783); at 1024 and 16384 the fused shapes were best
LIGHT_FWD = {
    2048: LaunchConfig(2, 2048, 4, False, 0),
    4096: LaunchConfig(2, 4096, 8, False, 0),
    8192: LaunchConfig(1, 8192, 8, False, 0),
}
#: RMSNorm alone (runs 30 and 36, GPU time, bf16, 32768 rows; the LayerNorm shapes in
#: brackets): one row per program, not persistent: 4096 x 8 warps 0.930-0.933 (0.885);
#: 8192 x 8 warps (32 elements per thread) 0.943 (0.832; 16 warps x 2/SM + prefetch 0.894);
#: 16384 x 16 warps 0.926 (the fused 32-warp shape 0.866)
LIGHT_FWD_RMS = {
    4096: LaunchConfig(1, 4096, 8, False, 0),
    8192: LaunchConfig(1, 8192, 8, False, 0),
    16384: LaunchConfig(1, 16384, 16, False, 0),
}


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _tile(rows: int, block_n: int) -> tuple[int, int]:
    """(rows per tile, warps): a tile of at least `MIN_TILE_ELEMS` elements (whole rows),
    `ELEMS_PER_THREAD` elements per thread."""
    block_m = max(1, min(next_pow2(rows), MIN_TILE_ELEMS // block_n))
    warps = max(1, min(32, block_m * block_n // (32 * ELEMS_PER_THREAD)))
    return block_m, warps


@functools.lru_cache(maxsize=4096)
def fwd_config(
    rows: int, hidden: int, elem_bytes: int = 2, streams: int = 4, is_rms: bool = False
) -> LaunchConfig:
    """`elem_bytes`: the widest storage dtype among x and residual (the prefetched raw
    values of a 32-warp row live in registers next to the fp32 ones). `streams`: row-sized
    tensors moved (4 = x, residual, y, s; 2 = a plain norm, x and y). `is_rms`: a plain
    RMSNorm has shapes of its own (`LIGHT_FWD_RMS`)."""
    block_n = max(8, next_pow2(hidden))
    light = LIGHT_FWD_RMS if is_rms else LIGHT_FWD
    if streams <= 2 and block_n in light and block_n * elem_bytes <= FWD_ONE_TILE_MAX_BYTES:
        return light[block_n]  # a plain norm: half the bytes per row
    if block_n <= 4096:  # one tile per program, 16 elements per thread
        block_m, warps = _tile(rows, block_n)
        return LaunchConfig(block_m, block_n, warps, False, 0)
    if block_n <= FWD_FUSED_MAX_N and block_n * elem_bytes <= FWD_ONE_TILE_MAX_BYTES:
        # 8192 (16384 in 16-bit storage): 32 warps, persistent, prefetching
        return LaunchConfig(1, block_n, 32, False, 4 if block_n <= 8192 else 1, prefetch=True)
    return LaunchConfig(1, FWD_CHUNK_N, FWD_CHUNK_WARPS, True, FWD_CHUNK_PPS)


@functools.lru_cache(maxsize=4096)
def bwd_config(
    rows: int, hidden: int, pair: tuple[int, int] | None = Knobs.bwd_pair
) -> LaunchConfig:
    """The backward's launch shape (see the module docstring for the measurements). `pair`:
    the `bwd_pair` knob (the launchers pass the one in force; the default is the shipped
    one)."""
    block_n = max(8, next_pow2(hidden))
    if 8192 < block_n <= BWD_PAIR_MAX_N and pair is not None:
        warps, pps = pair
        return LaunchConfig(1, block_n, warps, False, pps, pair=True)
    if block_n > 8192:
        # 16384+: the row and two N-wide fp32 accumulators would fill an SM's registers (one
        # program per SM: 0.36 of copy in run 4, whatever the variant). Split instead: the
        # chunked kernel makes two passes over each row (the second from L2) with no
        # accumulators, a column-parallel pass re-reads dy and s for dweight/dbias
        return LaunchConfig(1, BWD_SPLIT_CHUNK_N, 16, True, 2, split_params=True)
    # up to 8192: 16 elements per thread, 16 warps per SM, prefetching
    block_m, warps = _tile(rows, block_n)
    return LaunchConfig(block_m, block_n, warps, False, max(1, 16 // warps), prefetch=True)


@functools.lru_cache(maxsize=16)
def sm_count(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4  # the Triton interpreter on CPU: a few programs exercise the persistent loop


def grid_size(cfg: LaunchConfig, rows: int, device: torch.device) -> int:
    tiles = -(-rows // cfg.block_m)
    if cfg.programs_per_sm <= 0:
        return max(1, tiles)
    return max(1, min(tiles, sm_count(device) * cfg.programs_per_sm))
