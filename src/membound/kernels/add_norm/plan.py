"""Launch plans of the add_norm kernels: which kernel, grid, constexprs and buffers a problem gets,
made once per problem and cached, and the one state object the launchers keep.

A problem is described by a spec (`FwdSpec`, `BwdSpec`: shape, device, which parts are present,
dropout, norm, an explicit config); `plan_fwd` / `plan_bwd` turn a spec and the knobs in force
into a plan, a pure function of the two. The launchers (`launch.py`) look plans up by a key
tuple built from the tensors (shape, strides, dtypes, flags), so a repeated call costs a dict
lookup, its allocations and the launch itself: the spec is built only on a miss.

`PLANNER` holds what changes at run time, in one place: the knobs (`config.Knobs`), the plans
made under them, and whether the Gluon backward failed on this Triton. A failed Gluon launch
(`Planner.gluon_failed`) warns once, turns Gluon off for good and drops only the plans that
used it; the launcher then asks for its plan again and gets the SM-pair kernel.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

from membound.kernels._launch import Plan
from membound.kernels.add_norm import gluon
from membound.kernels.add_norm._jit import DROP_BITS
from membound.kernels.add_norm.chunked import (
    _add_norm_bwd_chunked_kernel,
    _add_norm_fwd_chunked_kernel,
)
from membound.kernels.add_norm.config import (
    Knobs,
    LaunchConfig,
    bwd_config,
    fwd_config,
    grid_size,
    next_pow2,
    sm_count,
)
from membound.kernels.add_norm.pair import SLOTS_PER_PAIR, _add_norm_bwd_pair_kernel
from membound.kernels.add_norm.partials import _param_partials_kernel, _sum_partials_kernel
from membound.kernels.add_norm.rows import _add_norm_bwd_kernel, _add_norm_fwd_kernel

#: plans kept at most (many distinct shapes: start over, stay bounded)
MAX_PLANS = 1024


@dataclass(frozen=True)
class FwdSpec:
    """A forward problem, as far as its plan depends on it."""

    rows: int
    hidden: int
    device: torch.device
    elem_bytes: int  # the widest storage dtype among x and residual
    has_residual: bool
    has_pre_bias: bool
    has_weight: bool
    has_bias: bool
    store_s: bool
    dropout_p: float
    is_rms: bool
    config: LaunchConfig | None  # None: `fwd_config`'s choice


@dataclass(frozen=True)
class BwdSpec:
    """A backward problem, as far as its plan depends on it."""

    rows: int
    hidden: int
    device: torch.device
    wants: tuple[bool, bool, bool]  # dweight, dbias, dpre_bias
    dropout_p: float
    is_rms: bool
    config: LaunchConfig | None  # None: `bwd_config`'s choice (or the Gluon kernel)
    has_ds: bool  # an incoming gradient of s
    has_weight: bool
    store_dr: bool  # dresidual written apart from dx
    gluon_rows: bool  # rows the Gluon kernel can copy (`gluon.rows_ok`; pointers aside)


def empty(shape, dtype, device) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, device=device)


def poisoned(shape, dtype, device) -> torch.Tensor:
    """`empty` filled with NaN (floats): an element no kernel writes fails the tests."""
    t = torch.empty(shape, dtype=dtype, device=device)
    return t.fill_(float("nan")) if t.is_floating_point() else t


def zeros(shape, dtype, device) -> torch.Tensor:
    return torch.zeros(shape, dtype=dtype, device=device)


@dataclass(frozen=True)
class FwdPlan:
    row: Plan
    threshold: int  # dropout threshold on 16 random bits
    scale: float  # of kept values
    alloc: Callable  # of the outputs: `empty`, or `poisoned` (knob `poison_outputs`)


@dataclass(frozen=True)
class BwdPlan:
    row: Plan
    params: Plan | None  # the split backward's parameter pass
    reduce: Plan | None
    k: int  # parameter gradients wanted
    p_rows: int  # partial rows per parameter
    split: bool
    threshold: int
    scale: float
    ex_size: int  # int64 exchange slots of the paired kernel (0: not paired)
    extra: tuple  # the row kernel's trailing arguments (the paired kernel's SPIN)
    alloc: Callable  # of the outputs
    part_alloc: Callable  # of the partials: `zeros` where the row kernel accumulates in place
    gluon: bool = False  # the row kernel is the Gluon one (`gluon.py`)


def dropout_args(p: float) -> tuple[int, float]:
    """(threshold on 16 random bits, scale of kept values) matching F.dropout."""
    threshold = min(int(round(p * (1 << DROP_BITS))), 1 << DROP_BITS)
    scale = 0.0 if p >= 1.0 else 1.0 / (1.0 - p)
    return threshold, scale


def plan_fwd(key: tuple, spec: FwdSpec, knobs: Knobs) -> FwdPlan:
    """The forward's plan (`key`: the launcher's, unique to the problem)."""
    M, N = spec.rows, spec.hidden
    streams = 2 + spec.has_residual + spec.store_s  # row-sized tensors moved
    cfg = spec.config or fwd_config(M, N, spec.elem_bytes, streams, spec.is_rms)
    threshold, scale = dropout_args(spec.dropout_p)
    common = dict(
        HAS_R=spec.has_residual, HAS_PB=spec.has_pre_bias, HAS_W=spec.has_weight,
        HAS_B=spec.has_bias, DROPOUT=spec.dropout_p > 0.0, IS_RMS=spec.is_rms,
        STORE_S=spec.store_s,
    )  # fmt: skip
    if cfg.chunked:
        kernel = _add_norm_fwd_chunked_kernel
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
    grid = (grid_size(cfg, M, spec.device),)
    row = Plan(key, kernel, grid, common, cfg.num_warps, cfg.num_stages, tuple(range(9)))
    return FwdPlan(row, threshold, scale, poisoned if knobs.poison_outputs else empty)


def plan_bwd(key: tuple, spec: BwdSpec, knobs: Knobs, gluon_runs: Callable) -> BwdPlan:
    """The backward's plan. `gluon_runs(device, block_n)`: whether the Gluon kernel can run
    there (`Planner.gluon_runs`)."""
    M, N, dev = spec.rows, spec.hidden, spec.device
    want_dweight, want_dbias, want_dpre_bias = spec.wants
    cfg = spec.config or bwd_config(M, N, knobs.bwd_pair)
    grid = launch_grid = grid_size(cfg, M, dev)  # programs over rows: one partial row each
    ex_size, extra = 0, ()
    gluon_on = False
    # the Gluon backward where it measured faster than the pair kernel (runs 42-47, 32768
    # rows, GPU time): rows of exactly 16384 (dropout 0.1: 1.36 vs 1.54 ms; none: 1.23 vs
    # 1.45), and narrower rows without dropout (12288: 1.12 vs 1.30); with dropout and
    # masked columns it spills (12288: 1.61 vs 1.44)
    even = N == cfg.block_n
    if cfg.pair and spec.config is None and spec.gluon_rows and not want_dpre_bias:
        gluon_on = bool(knobs.bwd_gluon) and (even or spec.dropout_p == 0.0)
        gluon_on = gluon_on and gluon_runs(dev, cfg.block_n)
    if gluon_on:  # one program per SM, persistent over rows
        grid = launch_grid = max(1, min(M, sm_count(dev)))
    elif cfg.pair:  # one program per SM at most: both programs of a pair must be resident
        grid = max(1, min(M, sm_count(dev) * cfg.programs_per_sm // 2))
        launch_grid = 2 * grid
        ex_size = SLOTS_PER_PAIR * grid
        # reloads of the partner's slots (~1 us each on the H200) before a thread sums the
        # partner's half itself; the CPU interpreter runs programs one by one: no waiting
        extra = (knobs.pair_spin if dev.type == "cuda" else 0,)
    # the chunked kernel accumulates in place, the others write each partial row once
    in_place = cfg.chunked and not cfg.split_params
    k = sum(spec.wants)
    split = cfg.split_params and k > 0
    # split: the first kernel writes dx (and dres) only; a second pass reduces the parameters
    split_programs, split_bm, split_bn, split_warps = knobs.split_pass
    p_rows = min(split_programs, M) if split else grid
    threshold, scale = dropout_args(spec.dropout_p)
    common = dict(
        HAS_DS=spec.has_ds, HAS_W=spec.has_weight, HAS_DW=want_dweight and not split,
        HAS_DB=want_dbias and not split, HAS_DPB=want_dpre_bias and not split,
        STORE_DR=spec.store_dr, DROPOUT=spec.dropout_p > 0.0, IS_RMS=spec.is_rms,
    )  # fmt: skip
    warps = cfg.num_warps
    if gluon_on:
        kernel = gluon._add_norm_bwd_smem_kernel
        warps = knobs.bwd_gluon
        # dbias partials in shared memory only with dropout: there the Philox state would
        # push registers into spills (run 47: 1.36 vs 1.60 ms; without dropout 1.31 vs 1.22)
        common.update(BLOCK_N=cfg.block_n, NUM_WARPS=warps, EVEN=even, DB_SMEM=spec.dropout_p > 0.0)
    elif cfg.chunked:
        kernel = _add_norm_bwd_chunked_kernel
    elif cfg.pair:
        kernel = _add_norm_bwd_pair_kernel
        common["HALF_N"] = cfg.block_n // 2
        fallback = knobs.pair_fallback
        common["FALLBACK"] = fallback if fallback is not None else 2 if dev.type == "cuda" else 1
    else:
        kernel = _add_norm_bwd_kernel
        common["W_ONCE"] = cfg.block_m * cfg.block_n <= 8192
        common["BLOCK_M"] = cfg.block_m
        common["PREFETCH"] = cfg.prefetch
    if not cfg.pair:
        common["BLOCK_N"] = cfg.block_n
    paired = cfg.pair and not gluon_on
    row = Plan(
        key + ("row",), kernel, (launch_grid,), common, warps, cfg.num_stages,
        tuple(range(12 if paired else 11)),
    )  # fmt: skip
    params = None
    if split:
        params = Plan(
            key + ("params",), _param_partials_kernel, (-(-N // split_bn), p_rows),
            dict(HAS_DW=want_dweight, HAS_DB=want_dbias, HAS_DPB=want_dpre_bias,
                 IS_RMS=spec.is_rms, BLOCK_M=split_bm, BLOCK_N=split_bn), split_warps, 1,
            tuple(range(6)),
        )  # fmt: skip
    reduce = None
    if k:
        # ~128 programs over the columns; plain int arithmetic (triton.cdiv is a JIT
        # function: calling it on the host costs microseconds)
        block_n = min(128, max(16, next_pow2(-(-N // 128))))
        reduce = Plan(
            key + ("reduce",), _sum_partials_kernel, (-(-N // block_n),),
            dict(K=k, BLOCK_P=32, BLOCK_N=block_n), 4, 1, tuple(range(4)),
        )  # fmt: skip
    alloc = poisoned if knobs.poison_outputs else empty
    return BwdPlan(
        row, params, reduce, k, p_rows, split, threshold, scale, ex_size, extra, alloc,
        zeros if in_place else alloc, gluon_on,
    )  # fmt: skip


class Planner:
    """The launchers' run-time state: the knobs in force, the plans made under them, and the
    error of a Gluon launch that failed here (None while Gluon is trusted)."""

    def __init__(self, knobs: Knobs | None = None):
        self.knobs = knobs or Knobs()
        self.plans: dict = {}
        self.gluon_error: BaseException | None = None

    def fwd(self, key: tuple, describe: Callable[[], FwdSpec]) -> FwdPlan:
        """The forward plan cached under `key`, else made from `describe()` (called on a miss
        only: the hot path is one dict lookup)."""
        plan = self.plans.get(key)
        if plan is None:
            plan = self._keep(key, plan_fwd(key, describe(), self.knobs))
        return plan

    def bwd(self, key: tuple, describe: Callable[[], BwdSpec]) -> BwdPlan:
        """The backward plan cached under `key`, else made from `describe()`."""
        plan = self.plans.get(key)
        if plan is None:
            plan = self._keep(key, plan_bwd(key, describe(), self.knobs, self.gluon_runs))
        return plan

    def _keep(self, key: tuple, plan):
        if len(self.plans) >= MAX_PLANS:  # many distinct problems: start over, stay bounded
            self.plans.clear()
        self.plans[key] = plan
        return plan

    def gluon_runs(self, device: torch.device, block_n: int) -> bool:
        """The Gluon backward can run on `device` for rows of `block_n` columns: CUDA with
        enough shared memory (`gluon.usable`), and no Gluon launch has failed here."""
        return self.gluon_error is None and gluon.usable(device, block_n)

    def gluon_failed(self, err: BaseException) -> None:
        """This Triton could not build or launch the Gluon kernel (Gluon is experimental and
        its API moves): warn once, use the pair kernel from now on, and drop the plans that
        chose Gluon (the others stay valid)."""
        if self.gluon_error is None:
            first = str(err).splitlines()[0][:200] if str(err) else ""
            warnings.warn(
                f"membound: the Gluon add_norm backward failed on this Triton "
                f"({type(err).__name__}: {first}); using the SM-pair kernel instead",
                RuntimeWarning,
                stacklevel=4,  # the caller of add_norm_bwd
            )
        self.gluon_error = err
        for key in [k for k, p in self.plans.items() if getattr(p, "gluon", False)]:
            del self.plans[key]

    def use(self, knobs: Knobs) -> Knobs:
        """Put `knobs` in force; returns the previous ones. The plans made under those are
        dropped, so the next call of each problem plans again."""
        previous, self.knobs = self.knobs, knobs
        self.plans.clear()
        return previous


#: the launchers' one state object
PLANNER = Planner()


def configure(**changes) -> Knobs:
    """Change the add_norm launchers' knobs by name (see `config.Knobs`), e.g.
    `configure(bwd_pair=None)`: the two-pass backward for rows of 9000-16384, for GPUs shared
    with other kernels. Returns the previous knobs (`PLANNER.use(previous)` puts them back)."""
    return PLANNER.use(dataclasses.replace(PLANNER.knobs, **changes))


@contextlib.contextmanager
def configured(**changes):
    """`configure(**changes)` for a block of code (tests, benchmarks), then the previous knobs
    again; yields the knobs in force inside."""
    previous = configure(**changes)
    try:
        yield PLANNER.knobs
    finally:
        PLANNER.use(previous)
