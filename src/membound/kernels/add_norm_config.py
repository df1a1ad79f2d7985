"""Launch configurations for the add_norm kernels, chosen by shape (no autotuning in the hot path).

Why these numbers (H100/H200-class GPUs, 132 SMs, 64K registers and 64 warps per SM):
- A tile holds whole rows: BLOCK_N = next power of two >= hidden. Rows wider than
  `FUSED_MAX_N` elements go to the chunked kernels (registers would spill).
- Small rows are batched, BLOCK_M rows per tile, so a tile holds ~`TILE_ELEMS` elements: one
  row of 64 bf16 per program would move 256 B per launch slot and be latency-bound.
- num_warps gives each thread ~`ELEMS_PER_THREAD` = 8 elements, i.e. one 16-byte vector per
  bf16 tensor: measured on the H200 (run 2, bf16 H=4096 fwd) 16 warps (8 elements/thread)
  0.789 of copy vs 0.678 at 8 warps (16/thread) and 0.484 at 4 warps; more warps per SM hide
  HBM latency better than more bytes in flight per thread. Capped at 16 warps (`w32` is a
  variant in the config table, untested as a default).
- Forward rows wider than `FWD_FUSED_MAX_N` (4096) take the chunked kernel with 4096-wide chunks,
  8 warps, 8 programs/SM: run 2 at H=16384 measured it at 0.732 of copy vs 0.569 for the
  one-tile kernel (16384 wide, 16 warps = 32 elements/thread, registers spill).
- The forward grid is persistent, `FWD_PROGRAMS_PER_SM` programs per SM striding over tiles:
  measured on the H200 (run 1) it beat one tile per program (0.774 vs 0.647 of copy at
  H=4096, 0.539 vs 0.490 at 16384). The backward is persistent too (each program writes an
  N-wide fp32 partial of dweight/dbias; fewer programs, less partial traffic), with ~32
  elements per thread: run 1 measured 4 warps x 4 programs/SM at H=4096 at 0.523 of copy vs
  0.441 for 8 warps x 2.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

FUSED_MAX_N = 16384
#: the forward's one-tile limit (the backward keeps FUSED_MAX_N: run 2's chunked/colsplit
#: backward variants at 16384 were all slower than its one-tile kernel). 8192 goes chunked
#: too: its one-tile kernel (16 warps, 16 elements/thread) measured 0.64 in run 2, the
#: chunked one 0.73 at 16384 with the same per-program work per chunk (run 3 checks 8192)
FWD_FUSED_MAX_N = 4096
CHUNK_N = 4096
#: (warps, programs per SM) of the chunked forward (run 2: `chunked4096` at H=16384)
FWD_CHUNK_WARPS, FWD_CHUNK_PPS = 8, 8
TILE_ELEMS = 4096
ELEMS_PER_THREAD = 8
BWD_ELEMS_PER_THREAD = 32
FWD_PROGRAMS_PER_SM = 2
#: None, or (min hidden, column block, warps, programs per SM): rows at least that wide use
#: the 2-D column-split backward. Off until the H200 config table (variants `colsplit*`)
#: shows it beating the one-tile kernel, which spills at 16384 (run 1: 0.29 of copy);
#: e.g. (16384, 4096, 8, 2) to switch it on for H = 16384.
BWD_COLSPLIT: tuple[int, int, int, int] | None = None


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
    #: backward only, with chunked: 2-D split, each program owns a block_n-wide column block
    #: of its rows and keeps that block's dweight/dbias partials in registers
    #: (`_add_norm_bwd_colsplit_kernel`); grid = row programs x column blocks
    col_split: bool = False


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _warps(elems: int, per_thread: int = ELEMS_PER_THREAD) -> int:
    return max(1, min(16, _next_pow2(elems // (32 * per_thread))))


@functools.lru_cache(maxsize=4096)
def fwd_config(rows: int, hidden: int) -> LaunchConfig:
    block_n = max(8, _next_pow2(hidden))
    if block_n > FWD_FUSED_MAX_N:
        return LaunchConfig(1, CHUNK_N, FWD_CHUNK_WARPS, True, FWD_CHUNK_PPS)
    block_m = max(1, min(_next_pow2(rows), TILE_ELEMS // block_n))
    return LaunchConfig(block_m, block_n, _warps(block_m * block_n), False, FWD_PROGRAMS_PER_SM)


@functools.lru_cache(maxsize=4096)
def bwd_config(rows: int, hidden: int) -> LaunchConfig:
    block_n = max(8, _next_pow2(hidden))
    if BWD_COLSPLIT is not None and hidden >= BWD_COLSPLIT[0]:
        _, cb, warps, pps = BWD_COLSPLIT
        return LaunchConfig(1, cb, warps, True, pps, col_split=True)
    if block_n > FUSED_MAX_N:
        return LaunchConfig(1, CHUNK_N, _warps(CHUNK_N, 16), True, 4)
    block_m = max(1, min(_next_pow2(rows), TILE_ELEMS // block_n))
    warps = _warps(block_m * block_n, BWD_ELEMS_PER_THREAD)
    # ~128 registers per thread: 16 warps fill an SM's 64K registers, so 16 // warps programs
    # are resident per SM; more would only queue behind them and enlarge the partial buffers
    return LaunchConfig(block_m, block_n, warps, False, max(1, 16 // warps))


@functools.lru_cache(maxsize=16)
def _sm_count(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4  # the Triton interpreter on CPU: a few programs exercise the persistent loop


def grid_size(cfg: LaunchConfig, rows: int, device: torch.device) -> int:
    tiles = -(-rows // cfg.block_m)
    if cfg.programs_per_sm <= 0:
        return max(1, tiles)
    return max(1, min(tiles, _sm_count(device) * cfg.programs_per_sm))
