"""Launch shapes by size (`config.py`: the measured best per width), and the knobs."""

from __future__ import annotations

import dataclasses

import pytest

from membound.kernels.add_norm.config import Knobs, LaunchConfig, bwd_config, fwd_config


def test_launch_configs_by_size():
    small = fwd_config(2048, 64)
    assert small.block_m > 1 and not small.chunked  # many rows per program for small rows
    assert fwd_config(4, 64).block_m == 4  # never a tile taller than the tensor
    assert not fwd_config(32768, 4096).chunked and fwd_config(8, 65536).chunked
    # run 4 (H200, GPU time): the best measured shape per width
    assert fwd_config(32768, 1024) == LaunchConfig(2, 1024, 4, False, 0)
    assert fwd_config(32768, 2048) == LaunchConfig(1, 2048, 4, False, 0)
    assert fwd_config(32768, 4096) == LaunchConfig(1, 4096, 8, False, 0)
    assert fwd_config(32768, 8192) == LaunchConfig(1, 8192, 32, False, 4, prefetch=True)
    assert fwd_config(32768, 16384) == LaunchConfig(1, 16384, 32, False, 1, prefetch=True)
    assert fwd_config(32768, 16385) == LaunchConfig(1, 2048, 8, True, 8)
    assert fwd_config(32768, 16384, 4).chunked and not fwd_config(32768, 8192, 4).chunked
    assert bwd_config(32768, 1024) == LaunchConfig(2, 1024, 4, False, 4, prefetch=True)
    assert bwd_config(32768, 4096) == LaunchConfig(1, 4096, 8, False, 2, prefetch=True)
    assert bwd_config(32768, 16384) == LaunchConfig(1, 16384, 16, False, 1, pair=True)
    assert bwd_config(32768, 16385) == LaunchConfig(1, 8192, 16, True, 2, split_params=True)
    assert bwd_config(8, 65536).chunked and bwd_config(8, 65536).split_params
    # a plain norm (x in, y out) where its own shapes measured better; elsewhere the fused one
    assert fwd_config(32768, 4096, 2, 2) == LaunchConfig(2, 4096, 8, False, 0)
    assert fwd_config(32768, 1024, 2, 2) == fwd_config(32768, 1024)
    # RMSNorm alone has its own; a 64 KB fp32 row of 16384 keeps the fused (chunked) shape
    assert fwd_config(32768, 16384, 2, 2, True) == LaunchConfig(1, 16384, 16, False, 0)
    assert fwd_config(32768, 16384, 4, 2, True) == fwd_config(32768, 16384, 4)
    assert fwd_config(1, 1).block_n == 8  # one Philox call covers 8 columns
    for n in (1, 7, 64, 300, 1024, 4096, 8192, 16384, 65536):
        for rows in (1, 5, 32768):
            for cfg in (fwd_config(rows, n), bwd_config(rows, n)):
                assert 1 <= cfg.num_warps <= 32 and cfg.block_m <= max(1, rows) * 2
                assert cfg.programs_per_sm >= 0 and cfg.block_n >= 8


def test_pair_backward_follows_its_knob():
    """`bwd_pair=None` (the README's switch for GPUs shared with other kernels) gives rows of
    9000-16384 the two-pass backward; other warps and programs per SM pass through."""
    assert bwd_config(32768, 16384, Knobs().bwd_pair).pair
    assert bwd_config(32768, 16384, None).split_params and not bwd_config(32768, 16384, None).pair
    assert bwd_config(32768, 9000, (8, 2)) == LaunchConfig(1, 16384, 8, False, 2, pair=True)
    assert bwd_config(32768, 4096, None) == bwd_config(32768, 4096)  # narrower rows: no pair


def test_knobs_are_frozen_with_the_measured_defaults():
    k = Knobs()
    assert (k.bwd_gluon, k.bwd_pair, k.poison_outputs) == (16, (16, 1), False)
    assert (k.pair_spin, k.pair_fallback, k.split_pass) == (1 << 14, None, (32, 32, 128, 4))
    with pytest.raises(dataclasses.FrozenInstanceError):
        k.bwd_pair = None
