"""Inductor kernels' launch parameters read from the generated sources (trace/kernel_args)."""

from __future__ import annotations

import sys
import types

from membound.trace.kernel_args import inductor_kernel_args, parse_kernel_defs

#: a piece of an output-code module as inductor writes it (torch 2.11): kernels as source
#: strings handed to async_compile, each with its triton_meta and a `def` line
OUTPUT_CODE = """
triton_poi_fused__to_copy_add_0 = async_compile.triton('triton_poi_fused__to_copy_add_0', '''
import triton
import triton.language as tl

@triton_heuristics.pointwise(
    size_hints={'x': 67108864}, filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*fp32', 'in_ptr1': '*fp32', 'out_ptr0': '*bf16', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}},
)
@triton.jit
def triton_poi_fused__to_copy_add_0(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 38633472
    xoffset = tl.program_id(0) * XBLOCK
''', device_str='cuda')

triton_per_fused_add_native_layer_norm_1 = async_compile.triton('triton_per_fused_add_native_layer_norm_1', '''
@triton.jit
def triton_per_fused_add_native_layer_norm_1(in_out_ptr0, in_ptr0, in_ptr1, out_ptr0,
        out_ptr1, xnumel, r0_numel, XBLOCK : tl.constexpr, R0_BLOCK : tl.constexpr):
    pass
''', device_str='cuda')

triton_tem_fused_mm_2 = async_compile.triton('triton_tem_fused_mm_2', '''
@triton.jit
def triton_tem_fused_mm_2(arg_A, arg_B, out_ptr0):
    pass
''', device_str='cuda')
"""


def test_the_launch_parameters_of_each_kernel_in_order():
    args = parse_kernel_defs([OUTPUT_CODE])
    assert args == {
        "triton_poi_fused__to_copy_add_0": ["in_ptr0", "in_ptr1", "out_ptr0", "xnumel"],
        "triton_per_fused_add_native_layer_norm_1": [
            "in_out_ptr0", "in_ptr0", "in_ptr1", "out_ptr0", "out_ptr1", "xnumel", "r0_numel",
        ],
        "triton_tem_fused_mm_2": ["arg_A", "arg_B"] + ["out_ptr0"],
    }  # fmt: skip


def test_a_name_defined_two_ways_is_left_out():
    """Two compiled graphs can both make a `triton_poi_fused_add_0`: with the same
    parameters it is kept, with different ones it cannot be told which a trace's call ran."""
    same = "def triton_poi_fused_add_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):"
    other = "def triton_poi_fused_add_0(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK : tl.constexpr):"
    assert parse_kernel_defs([same, same]) == {
        "triton_poi_fused_add_0": ["in_ptr0", "out_ptr0", "xnumel"]
    }
    assert parse_kernel_defs([same, other]) == {}


def test_read_from_the_modules_inductor_loaded(tmp_path, monkeypatch):
    """The names come from the files of PyCodeCache's modules; without inductor imported,
    there are none (and nothing is imported to find out)."""
    monkeypatch.delitem(sys.modules, "torch._inductor.codecache", raising=False)
    assert inductor_kernel_args() == {}
    path = tmp_path / "c3xyz.py"
    path.write_text(OUTPUT_CODE)
    module = types.SimpleNamespace(__file__=str(path))
    gone = types.SimpleNamespace(__file__=str(tmp_path / "missing.py"))
    cache = types.SimpleNamespace(modules=[module, gone], modules_no_attr={str(path): module})
    monkeypatch.setitem(
        sys.modules, "torch._inductor.codecache", types.SimpleNamespace(PyCodeCache=cache)
    )
    args = inductor_kernel_args()
    assert set(args) == {
        "triton_poi_fused__to_copy_add_0",
        "triton_per_fused_add_native_layer_norm_1",
        "triton_tem_fused_mm_2",
    }
