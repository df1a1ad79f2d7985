"""benchmarks/compile_host_gaps.py: a loop's host time split by what each call launched."""

from __future__ import annotations

import pytest

from support.paths import benchmark


def test_the_tabular_mlps_host_sits_in_its_loader_not_its_model():
    """The tabular MLP (2026-12-04, H200): of its 10.2 ms step, the host's gaps before its
    85 kernel launches total 2.5 ms; 7.5 ms sit before the 27 calls that launch no kernel
    (the per-row collate on the training thread, then the batch's copies). compile, which
    can only shorten the first part, measured -2.11 ms/step."""
    rows = benchmark("compile_host_gaps").rows(["tabular_mlp"])
    row = next(r for r in rows if r["fixture"] == "h200_real_tabular_mlp_oos1")
    assert row["step_ms"] == pytest.approx(10.18, abs=0.01)
    assert (row["library_gap_ms"], row["library_calls"]) == (pytest.approx(1.24, abs=0.01), 28)
    assert (row["fusible_gap_ms"], row["fusible_calls"]) == (pytest.approx(1.27, abs=0.01), 57)
    assert (row["other_gap_ms"], row["other_calls"]) == (pytest.approx(7.51, abs=0.01), 27)
    parts = row["library_gap_ms"] + row["fusible_gap_ms"] + row["other_gap_ms"]
    assert parts + row["other_own_ms"] <= row["step_ms"]
    assert row["compile_measured_ms"] == pytest.approx(-2.11, abs=0.01)


def test_library_kernels_are_told_from_fusible_ones():
    lib = benchmark("compile_host_gaps").LIBRARY
    for name in ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
                 "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1, true>",
                 "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<...>",
                 "ampere_sgemm_128x64_nn", "fmha_cutlassF_f32_aligned_64x64_rf_sm80"):  # fmt: skip
        assert lib.search(name), name
    for name in ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor>",
                 "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>",
                 "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float>"):  # fmt: skip
        assert not lib.search(name), name
