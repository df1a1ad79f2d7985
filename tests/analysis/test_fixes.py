"""Fix texts fit the op family and the framework in use (issue 15: a BatchNorm was told to
use a LayerNorm module)."""

from __future__ import annotations

import pytest

from membound.analysis import analyze
from membound.analysis.fixes import (
    bf16_fix,
    chain_fix,
    memory_bound_fix,
    op_family,
    pageable_fix,
    sync_fix,
)
from membound.trace.capture_meta import timeline_in
from support import tracebuilder


@pytest.mark.parametrize(
    "name,family",
    [
        ("aten::cudnn_batch_norm", "batch_norm"),
        ("aten::native_batch_norm_backward", "batch_norm"),
        ("aten::native_layer_norm", "layer_norm"),
        ("aten::native_layer_norm_backward", "layer_norm"),
        ("aten::_fused_rms_norm", "rms_norm"),
        ("aten::native_group_norm", "group_norm"),
        ("aten::cudnn_convolution", "conv"),
        ("aten::convolution_backward", "conv"),
        ("aten::_foreach_add_", "optimizer"),
        ("aten::_fused_adamw_", "optimizer"),
        ("aten::mm", "matmul"),
        ("aten::_softmax", "softmax"),
        ("aten::_scaled_dot_product_flash_attention", "attention"),
        ("aten::add", "elementwise"),
        # inductor's kernels name the ops they fused: still one compiled kernel
        ("triton_red_fused_native_layer_norm_0", "inductor"),
        ("triton_poi_fused__to_copy_add_1", "inductor"),
    ],
)
def test_op_family(name, family):
    assert op_family(name) == family


def test_batch_norm_is_never_told_to_use_a_layernorm_module():
    fix = memory_bound_fix("aten::cudnn_batch_norm")
    assert "channels_last" in fix and "autocast" in fix and "torch.compile" in fix
    for wrong in ("LayerNorm", "FusedAdd", "swap_norms"):
        assert wrong not in fix


def test_norm_fix_names_fused_add_only_after_a_residual_add():
    alone = memory_bound_fix("aten::native_layer_norm")
    assert "membound.swap_norms(model)" in alone and "FusedAdd" not in alone
    after = memory_bound_fix("aten::native_layer_norm", after_residual_add=True)
    assert "membound.nn.FusedAddLayerNorm" in after
    assert "FusedAddRMSNorm" in memory_bound_fix("aten::_fused_rms_norm", after_residual_add=True)


def test_conv_optimizer_and_elementwise_fixes():
    assert "channels_last" in memory_bound_fix("aten::cudnn_convolution")
    assert "fused=True" in memory_bound_fix("aten::_foreach_mul_")
    assert "torch.compile" in memory_bound_fix("aten::add")


def test_chain_fix():
    assert "FusedAddLayerNorm" in chain_fix(["aten::add", "aten::native_layer_norm"], True)
    plain = chain_fix(["aten::mul", "aten::gelu"], False)
    assert "FusedAdd" not in plain and "torch.compile" in plain
    bn = chain_fix(["aten::cudnn_batch_norm", "aten::relu_"], False)
    assert "LayerNorm" not in bn and "channels_last" in bn


@pytest.mark.parametrize(
    "frameworks,dataloader,expected",
    [
        (("transformers", "accelerate"), True, "dataloader_pin_memory=True"),
        (("lightning",), True, "LightningModule"),
        ((), True, "DataLoader(pin_memory=True)"),
        ((), False, "tensor.pin_memory()"),
        (("timm",), True, "create_loader(..., pin_memory=True)"),
    ],
)
def test_pageable_fix_names_the_switch_in_use(frameworks, dataloader, expected):
    fix = pageable_fix(frameworks, dataloader)
    assert expected in fix and "membound.data.prefetch(loader)" in fix


@pytest.mark.parametrize(
    ("frameworks", "switch"),
    [
        (("transformers", "accelerate"), "TrainingArguments(bf16=True)"),
        (("lightning",), "Trainer(precision='bf16-mixed')"),
        (("timm",), "--amp-dtype bfloat16"),
        ((), "torch.autocast('cuda', dtype=torch.bfloat16)"),
    ],
)
def test_bf16_fix_names_the_switch_in_use_and_the_measured_speed(frameworks, switch):
    text = bf16_fix(frameworks, 0.8)
    assert switch in text and "1.25x as fast in bf16" in text


def test_sync_fix_names_the_logging_knob_in_use():
    hf = sync_fix(["transformers"])
    assert "logging_nan_inf_filter=False" in hf and "logging_steps" in hf
    assert "log_every_n_steps" in sync_fix(["pytorch_lightning"])
    assert "every N steps" in sync_fix([])


def test_a_memory_bound_batch_norm_in_a_trace_gets_the_batch_norm_fix(tmp_path, ceilings):
    b = tracebuilder.TraceBuilder()
    dims = [[64, 256, 56, 56], [256], [256], [256], [256], [], [], []]
    types = ["float", "float", "float", "float", "float", "Scalar", "Scalar", "Scalar"]
    for s in range(2):
        o = s * 3000.0
        b.step(s, o, 3000.0)
        b.op(
            "aten::cudnn_batch_norm",
            o + 1,
            20,
            dims,
            types,
            ["", "", "", "", "", "True", "0.1", "1e-05"],
        )
        b.launch("cudnn::bn_fw_tr_1C11_kernel_NCHW", o + 5, o + 30, 2000.0)
    a = analyze([b.write(tmp_path / "bn.json")], ceilings)
    (f,) = [f for f in a.findings if f.code == "memory-bound-op"]
    assert f.evidence["op"] == "aten::cudnn_batch_norm"
    assert "LayerNorm" not in f.fix and "channels_last" in f.fix


def test_the_capture_meta_names_the_frameworks_the_fix_then_names(tmp_path, ceilings, monkeypatch):
    import json
    import shutil
    import sys
    import types

    from membound.trace.capture_meta import frameworks
    from support.paths import FIXTURES

    monkeypatch.setitem(sys.modules, "transformers", types.ModuleType("transformers"))
    assert "transformers" in frameworks()
    shutil.copy(timeline_in(FIXTURES / "synthetic_input_pipeline"), tmp_path)
    (tmp_path / "capture.json").write_text(json.dumps({"frameworks": frameworks()}))
    a = analyze([tmp_path / "trace.json.gz"], ceilings)
    f = {x.code: x for x in a.findings}
    assert "dataloader_pin_memory=True" in f["pageable-copy"].fix
    assert "logging_steps" in f["host-sync"].fix


def test_a_compiled_kernel_is_not_told_to_compile_or_swap_norms():
    """Issue 16: don't propose fusing what inductor already fused."""
    fix = memory_bound_fix("triton_per_fused_native_layer_norm_backward_3")
    assert "already fused" in fix and "max-autotune" in fix
    assert "swap_norms" not in fix and "FusedAdd" not in fix
