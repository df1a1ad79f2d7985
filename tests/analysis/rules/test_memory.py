"""`memory-bound-op`, `fp32-storage` and `unfused-chain` against the planted memory block
(hand-computed numbers)."""

from __future__ import annotations

import pytest

from support.analysis import ADD, LN, by_code, run


@pytest.fixture
def block(ceilings):
    return run("synthetic_memory_block", ceilings)


def test_findings_of_the_memory_block_in_order(block):
    # fp32-storage below unfused-chain: it no longer counts the chain's intermediates too
    assert [f.code for f in block.findings] == [
        "fp32-matmul",
        "memory-bound-op",
        "launch-bound",
        "unfused-chain",
        "fp32-storage",
    ]


def test_memory_bound_op(block):
    # aten::add: 0.6 ms of the 3.75 ms of kernels (16%) vs its bytes at 1 TB/s
    mb = by_code(block)["memory-bound-op"]
    assert mb.evidence["op"] == "aten::add"
    assert mb.time_lost_ms_per_step == pytest.approx(0.6 - ADD.bytes / 1e12 * 1e3)
    rows = {r.name: r for r in block.ops}
    assert rows["aten::add"].bound == "memory" and rows["aten::native_layer_norm"].bound == "memory"
    assert rows["aten::add"].achieved_bandwidth_fraction == pytest.approx(ADD.bytes / 0.6e-3 / 1e12)
    assert "aten::layer_norm" not in rows  # kernels belong to the innermost op with a cost


def test_fp32_storage(block):
    # half the fp32 bytes at 1 TB/s, less the add's 32 MiB output written and read back by the
    # LayerNorm: those are unfused-chain's (fused and in bf16, the two savings add up)
    chained = 2 * 8192 * 1024 * 4
    f = by_code(block)["fp32-storage"]
    assert f.time_lost_ms_per_step == pytest.approx(0.5 * (ADD.bytes + LN.bytes - chained) / 1e9)
    assert f.evidence["chain_intermediate_bytes_left_to_unfused_chain_per_step"] == chained


def test_unfused_chain(block):
    # the add's 32 MiB output is written then read back by the LayerNorm
    uc = by_code(block)["unfused-chain"]
    assert uc.evidence["top_chain"] == "aten::add → aten::native_layer_norm"
    assert uc.time_lost_ms_per_step == pytest.approx(2 * 8192 * 1024 * 4 / 1e12 * 1e3)
    assert "FusedAddLayerNorm" in uc.fix
