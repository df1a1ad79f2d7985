"""What an op call's storage dtype and tensor-core use are read from."""

from __future__ import annotations

import pytest

from membound.analysis.op_calls import storage_dtype
from membound.analysis.ops import _tensor_core_flags


def test_storage_dtype_is_the_largest_tensor_inputs():
    # native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, mask)
    dims = [[4096, 1024], [4096, 1024], [], [4096, 1], [4096, 1], [1024], [1024], []]
    types = ["c10::BFloat16"] * 2 + ["", "float", "float"] + ["c10::BFloat16"] * 2 + [""]
    assert storage_dtype(dims, types) == "c10::BFloat16"
    assert storage_dtype([[8], [64, 64]], ["c10::BFloat16", "float"]) == "float"
    assert storage_dtype([[], []], ["Scalar", "Scalar"]) is None
    assert storage_dtype(None, None) is None


@pytest.mark.parametrize(
    "name, flag",
    [
        ("sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x64x32", True),
        ("_ZN17cutlass__5x_cudnn6KernelINS_4conv6kernel23ImplicitGemmConvolutionITensorOp", True),
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", True),
        ("void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_nn_align1>(Params)", False),
        (
            "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_stage3_warpsize4x2x1_ffma",
            False,
        ),
        ("void sgemm_largek_lds64<true, false, 5, 5, 4, 4, 4, 34>(float*)", False),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", None),
    ],
)
def test_tensor_core_evidence_from_kernel_names(name, flag):
    assert _tensor_core_flags([name]) == [flag]
