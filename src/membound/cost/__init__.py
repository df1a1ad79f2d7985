"""membound.cost: what an op must do — FLOPs and minimal bytes per aten op.

One registry of formulas (`register`), two entry points:
- live: `CostCounter`, a dispatch mode recording every aten op of a function with its cost;
- post hoc: `cost_of(op_name, input_shapes, input_dtypes, concrete_inputs)` from what a
  profiler trace records with `record_shapes=True` (`cost_of_event` takes the event args).

Conventions:
- FLOPs: a multiply-add is 2 FLOPs (as torch.utils.flop_counter, whose matmul, conv and
  attention formulas are reused). Pointwise: 1 FLOP per output element per elementary op
  (add, mul, exp, erf, ...); composite activations count theirs (gelu 5, silu 4 ...).
  Norms: ~5 per element forward + 1 per affine term, 8 per element for dx backward.
  Each formula module's docstring lists its counts.
- Bytes are minimal: each distinct input tensor read once (a broadcast input at its real
  storage extent), each output written once. Attention never counts the L×L scores.
  `Cost.read_bytes` says how many of them are read where a formula counts reads and writes
  apart (all but the inductor kernels' and unknown ops'); None where the split is unknown.
- `Cost.compute`: "fp64"/"fp32"/"fp16"/"bf16"/"fp8" for matmul, conv, attention and cuDNN's
  recurrent layers (`formulas.rnn`: their gate products) (fp32
  matmul stays "fp32"; the roofline maps it to "tf32" when TF32 is enabled), "fp32_vector"
  for everything else, None for views and unknown ops.
- Unknown ops: 0 FLOPs, bytes = inputs + outputs, `exact=False`.
- A trace records no dtype for a TensorList (`_foreach_*`, cat): `cost_of(...,
  list_dtypes=...)` takes it from the caller (`formulas.foreach.list_dtypes_of` reads it off
  the op's multi_tensor_apply kernels); without it the `_foreach_*` formulas assume float32
  and say so (`exact=False`, `Cost.assumed_dtype`).
"""

from membound.cost import formulas as _formulas  # noqa: F401  (registers every formula)
from membound.cost.call import OpCall, TensorMeta
from membound.cost.registry import Cost, evaluate, normalize_name, register, registered, unregister
from membound.cost.trace_args import cost_of, cost_of_event, parse_args

__all__ = [
    "Cost",
    "CostCounter",
    "OpCall",
    "OpRecord",
    "TensorMeta",
    "cost_of",
    "cost_of_event",
    "evaluate",
    "normalize_name",
    "parse_args",
    "register",
    "registered",
    "unregister",
]


def __getattr__(name: str):
    # the counter imports torch's dispatch machinery: load it on first use
    if name in ("CostCounter", "OpRecord", "OpTotals"):
        from membound.cost import counter

        return getattr(counter, name)
    raise AttributeError(f"module 'membound.cost' has no attribute {name!r}")
