"""Ops that run faster than the ceilings allow: one note names the worst, the tables print
">100%" rather than a figure above the roof, and the JSON keeps the measured fraction."""

from __future__ import annotations

import json

from membound.analysis import analyze
from membound.analysis.op_rows import above_roof_note
from membound.analysis.result import OpRow
from membound.demos import recorded_ceilings, recorded_trace
from membound.report.terminal import roof_pct


def _row(name, bw, flops=0.0, bound="memory"):
    return OpRow(
        name=name, calls=1, device_ms=1.0, flops=0.0, bytes=1.0, arithmetic_intensity=0.1,
        bound=bound, achieved_bandwidth_fraction=bw, achieved_flops_fraction=flops,
        compute="fp32_vector", dtypes=["float"], exact_cost=True, share_of_gpu_time=0.1,
    )  # fmt: skip


def test_note_names_the_op_furthest_above_its_roof():
    assert above_roof_note([_row("a", 0.99), _row("b", 1.004)]) is None  # rounds to 100%
    note = above_roof_note([_row("a", 1.06), _row("b", 1.12), _row("c", 0.5)])
    assert note.startswith("2 op(s) ran above a ceiling (b at 112.0% of the measured memory")
    assert "membound roofline --refresh" in note and "either data still in L2" in note
    # within what ops and ceilings measured in one H200 call showed: said so
    near = above_roof_note([_row("f", 1.02)])
    assert (
        "at 102.0%" in near
        and "memory-bound ops up to 0.3% above passes timed by the kernel clock" in near
    )
    assert "fp32_vector FLOP/s" in above_roof_note([_row("d", 0.2, flops=1.3, bound="compute")])
    unplaced = _row("e", 3.0, bound=None)
    assert above_roof_note([unplaced]) is None


def test_fractions_above_the_roof_print_as_above():
    assert roof_pct(1.12) == ">100%" and roof_pct(1.004) == "100%" and roof_pct(0.5) == "50%"


def test_shipped_trace_with_ops_above_the_copy_roof():
    """The shipped pageable-copy trace on its own H200 ceilings: ReLU forward (clamp_min) and
    backward (threshold_backward) move their bytes faster than the measured HBM copy."""
    a = analyze(recorded_trace("pageable-copy"), recorded_ceilings())
    notes = [n for n in a.notes if "above a ceiling" in n]
    assert len(notes) == 1 and notes[0].startswith("2 op(s) ran above a ceiling (aten::clamp_min")
    rows = {r.name: r for r in a.ops}
    assert rows["aten::clamp_min"].achieved_bandwidth_fraction > 1.1  # the JSON keeps the truth
    from membound.report import html
    from membound.report.json_report import to_dict

    data = json.loads(json.dumps(to_dict(a)))
    assert any("above a ceiling" in n for n in data["notes"])
    page = html.render(a)
    clamp = page[page.index("aten::clamp_min</td>") :].split("</tr>")[0]
    assert "&gt;100%" in clamp and "112%" not in clamp


def test_cat_of_a_tensor_list_takes_its_element_size_from_the_copy_kernel():
    """The profiler records no dtype for a TensorList, so the cost model reads cat's inputs
    as float32. GPT-2's backward concatenates three bf16 [12, 1024, 768] gradients (its
    kernel: CatArrayBatchedCopy_vectorized<OpaqueType<2u>, ...>): costed as fp32 it showed
    at 188% of the memory roof; at 2 bytes an element it is 94%."""
    from membound.analysis.ops import _element_sizes, join_calls
    from membound.trace.load import load_trace
    from support.paths import FIXTURES

    assert _element_sizes(["void at::native::CatArrayBatchedCopy<OpaqueType<2u>, 3>", "x"]) == [
        2,
        0,
    ]
    trace = load_trace(FIXTURES / "h200_real_gpt2" / "trace.ops.json.xz")
    cats = [c for c in join_calls(trace) if c.name == "aten::cat" and c.dims]
    bf16 = [c for c in cats if c.dims[0] and len(c.dims[0]) == 3]
    assert bf16 and all(c.bytes == 2 * 2 * 3 * 12 * 1024 * 768 for c in bf16)  # read + write
