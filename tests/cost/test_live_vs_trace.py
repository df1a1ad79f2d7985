"""Post-hoc costs from REAL recorded profiler args equal live costs of the same calls."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from membound.cost import CostCounter, cost_of_event, registered
from membound.cost.registry import family_of

from .scenarios import SCENARIOS

FIXTURE = json.loads(gzip.decompress((Path(__file__).parent / "trace_args.json.gz").read_bytes()))

# ops whose live and post-hoc costs must both be seen and agree, per scenario
MUST_MATCH = {
    "mlp": {
        "aten::addmm",
        "aten::native_layer_norm",
        "aten::gelu",
        "aten::gelu_backward",
        "aten::native_layer_norm_backward",
        "aten::mm",
        "aten::sum",
    },
    "assorted": {
        "aten::add",
        "aten::add_",
        "aten::mul",
        "aten::sub",
        "aten::div",
        "aten::where",
        "aten::_softmax",
        "aten::_log_softmax",
        "aten::sum",
        "aten::mean",
        "aten::var",
        "aten::_scaled_dot_product_flash_attention_for_cpu",
        "aten::convolution",
        "aten::native_group_norm",
        "aten::embedding",
        "aten::_to_copy",
        "aten::copy_",
        "aten::nll_loss_forward",
        "aten::bmm",
        "aten::baddbmm",
        "aten::cat",
    },
    "backward": {
        "aten::embedding_dense_backward",
        "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
        "aten::_softmax_backward_data",
        "aten::_log_softmax_backward_data",
        "aten::nll_loss_backward",
        "aten::convolution_backward",
        "aten::native_batch_norm_backward",
        "aten::native_group_norm_backward",
        "aten::silu_backward",
        "aten::tanh_backward",
        "aten::native_batch_norm",
    },
}


def _outermost(events: list[dict]) -> list[dict]:
    """Drop an op nested in an op of the same name (sum.default -> sum.dim_IntList)."""
    kept, open_by_name = [], {}
    for e in events:
        parent = open_by_name.get(e["name"])
        if parent is not None and e["ts"] < parent["ts"] + parent["dur"]:
            continue
        open_by_name[e["name"]] = e
        kept.append(e)
    return kept


def _pairs(scenario: str):
    with CostCounter() as counter:
        SCENARIOS[scenario]()
    events = _outermost(FIXTURE["scenarios"][scenario])
    pos = 0
    for rec in counter.records:
        if family_of(rec.name) in (None, "view", "fill"):
            continue
        for j in range(pos, len(events)):
            if events[j]["name"] == rec.name:
                yield rec, events[j]
                pos = j + 1
                break


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_post_hoc_equals_live(scenario):
    seen = set()
    for rec, event in _pairs(scenario):
        post = cost_of_event(event["name"], event["args"])
        assert post == rec.cost, (rec.name, event["args"], rec.input_shapes)
        seen.add(rec.name)
    missing = MUST_MATCH[scenario] - seen
    assert not missing, f"never compared: {sorted(missing)}"


def test_every_recorded_leaf_op_has_an_exact_formula():
    """Every aten op the real trace shows for the covered families is known (no fallback)."""
    names = {e["name"] for evs in FIXTURE["scenarios"].values() for e in evs}
    unknown = sorted(n for n in names if n not in registered())
    # composites/helpers that only appear as parents in a CPU trace may stay unknown
    allowed = {"aten::to", "aten::arange", "aten::reshape", "aten::pow", "aten::type_as"}
    assert set(unknown) <= allowed | {n for n in unknown if "empty" in n}, unknown
    for evs in FIXTURE["scenarios"].values():
        for e in evs:
            if e["name"] in registered():
                assert cost_of_event(e["name"], e["args"]).exact
