"""Registry of cost formulas: one entry per aten op packet, one source of truth.

A formula is a function `(call: OpCall) -> Cost`, registered with `@register("aten::mm",
family="matmul")`. Names are normalized to the op *packet*: "aten.add.Tensor",
"aten::add", "add" all mean "aten::add" (overloads share a formula; a formula reads the
schema-ordered arguments and tolerates the overload's variations). Registering a name twice
raises `ValueError` unless `replace=True` — that is how a user overrides a formula.

Conventions every formula follows (see `membound.cost` for the per-family FLOP counts):
- bytes are *minimal* bytes: each distinct input tensor read once (a broadcast input counts
  its real storage extent), each output written once; intermediates a perfect kernel keeps
  on chip are not counted. `read_bytes` says how many of them are read where the formula
  counts reads and writes apart (`simple` does); the rest are written.
- `compute` names the ceiling (`membound.device.ceilings.COMPUTE_KEYS`) the op's arithmetic
  runs on: matmul/conv/attention -> the dtype key ("fp32", "bf16", ...), the rest ->
  "fp32_vector"; views and unknown ops -> None.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from membound.cost.call import OpCall, TensorMeta, distinct_bytes

VECTOR = "fp32_vector"


@dataclass(frozen=True)
class Cost:
    """FLOPs and minimal bytes of one op call (or a sum of calls)."""

    flops: float
    bytes: float
    compute: str | None
    # False: unknown op, bytes guessed as inputs + outputs; or an estimate (`assumed_dtype`)
    exact: bool = True
    family: str = ""
    # bytes read, of `bytes` (the rest are written); None: the split is unknown. The HBM
    # roof of a call follows its share of reads (`analysis.roofline.hbm_rate`)
    read_bytes: float | None = None
    # the dtype a formula assumed for tensors whose dtype was not recorded (a trace's
    # TensorList elements), with exact=False; None when every dtype was known
    assumed_dtype: str | None = None
    # bytes of the largest single argument the call reads (None: unknown): where every read
    # argument fits in L2 on its own, the producer that just wrote them may have left them
    # there (`analysis.roofline.call_memory_roof`)
    largest_read: float | None = None

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOP per byte (0 when the op moves nothing)."""
        if self.bytes:
            return self.flops / self.bytes
        return float("inf") if self.flops else 0.0

    def __add__(self, other: Cost) -> Cost:
        compute = self.compute if self.compute == other.compute else None
        family = self.family if self.family == other.family else ""
        # a sum knows its split of reads only where every part knows its own
        reads = None
        if self.read_bytes is not None and other.read_bytes is not None:
            reads = self.read_bytes + other.read_bytes
        # a sum rests on every assumption its parts made
        parts = {d for a in (self.assumed_dtype, other.assumed_dtype) if a for d in a.split("/")}
        assumed = "/".join(sorted(parts))
        largest = None
        if self.largest_read is not None and other.largest_read is not None:
            largest = max(self.largest_read, other.largest_read)
        return Cost(
            self.flops + other.flops,
            self.bytes + other.bytes,
            compute,
            self.exact and other.exact,
            family,
            reads,
            assumed or None,
            largest,
        )


def _figure(cost, name: str) -> float:
    """`cost`'s optional figure `name` as a float, NaN where it is None (or the cost is a
    stand-in without it)."""
    value = getattr(cost, name, None)
    return math.nan if value is None else float(value)


def largest_read_of(cost) -> float:
    """A cost's largest read argument (`Cost.largest_read`), NaN where unknown."""
    return _figure(cost, "largest_read")


def read_bytes_of(cost) -> float:
    """A cost's bytes read (`Cost.read_bytes`), NaN where the split is unknown (or the cost
    is a stand-in without it)."""
    return _figure(cost, "read_bytes")


Formula = Callable[[OpCall], Cost]

_FORMULAS: dict[str, tuple[Formula, str]] = {}


def normalize_name(name: str) -> str:
    """ "aten.add.Tensor" / "aten::add.Tensor" / "add" -> "aten::add"."""
    name = name.strip()
    if "::" in name:
        namespace, _, rest = name.rpartition("::")
        return f"{namespace}::{rest.split('.')[0]}"
    parts = name.split(".")
    if len(parts) >= 2:
        return f"{parts[0]}::{parts[1]}"
    return f"aten::{parts[0]}"


def register(*op_names: str, family: str, replace: bool = False) -> Callable[[Formula], Formula]:
    """Decorator: register `fn(call) -> Cost` for each op name in `op_names`."""
    if not op_names:
        raise ValueError("register() needs at least one op name, e.g. register('aten::mm', ...)")
    names = [normalize_name(n) for n in op_names]
    if not replace:
        taken = [n for n in names if n in _FORMULAS]
        if taken:
            raise ValueError(
                f"cost formula already registered for {', '.join(taken)}; "
                "pass replace=True to override it"
            )

    def decorate(fn: Formula) -> Formula:
        for n in names:
            _FORMULAS[n] = (fn, family)
        return fn

    return decorate


_PREFIXES: dict[str, tuple[Formula, str]] = {}


def register_prefix(*prefixes: str, family: str) -> Callable[[Formula], Formula]:
    """Decorator: register `fn(call) -> Cost` for every op whose name starts with one of
    `prefixes`: kernels named per launch (inductor's `triton_poi_fused_add_0`), not per op.
    An exact name registered with `register` wins over a prefix."""

    def decorate(fn: Formula) -> Formula:
        for p in prefixes:
            if p in _PREFIXES:
                raise ValueError(f"cost formula already registered for names starting {p!r}")
            _PREFIXES[p] = (fn, family)
        return fn

    return decorate


def _by_prefix(name: str) -> tuple[Formula, str] | None:
    base = name.split("::")[-1]
    return next((entry for p, entry in _PREFIXES.items() if base.startswith(p)), None)


def unregister(op_name: str) -> None:
    """Remove a formula (mainly for tests that register temporary ones)."""
    _FORMULAS.pop(normalize_name(op_name), None)


def registered() -> list[str]:
    """Sorted names that have a formula."""
    return sorted(_FORMULAS)


def family_of(op_name: str) -> str | None:
    entry = _FORMULAS.get(normalize_name(op_name)) or _by_prefix(op_name)
    return entry[1] if entry else None


def fallback(call: OpCall) -> Cost:
    """Unknown op: 0 FLOPs, bytes = inputs + outputs, marked inexact.

    Post hoc the outputs are unknown; one output as large as the largest input is assumed
    (right for elementwise-like ops, the common case of an unregistered op).
    """
    tensors = call.tensors()
    if call.outputs is not None:
        written = sum(o.nbytes for o in call.outputs)
    else:
        written = max((t.numel * t.itemsize for t in tensors), default=0)
    return Cost(0.0, float(distinct_bytes(tensors) + written), None, False, "unknown")


_WARNED: set[str] = set()


def _warn_once(name: str, exc: Exception) -> None:
    if name not in _WARNED:
        _WARNED.add(name)
        warnings.warn(
            f"membound: cost formula for {name} could not read its arguments ({exc!r}); "
            "counting it as an unknown op",
            RuntimeWarning,
            stacklevel=3,
        )


def evaluate(call: OpCall) -> Cost:
    """Cost of one call through its registered formula (or the unknown-op fallback)."""
    prefixed = _by_prefix(call.name)
    call.name = normalize_name(call.name)
    entry = _FORMULAS.get(call.name) or prefixed
    if entry is None:
        return fallback(call)
    fn, family = entry
    try:
        cost = fn(call)
    except Exception as exc:
        # arguments a formula cannot read (a trace that records an overload differently,
        # a missing tensor): degrade to the inexact fallback instead of failing the analysis
        _warn_once(call.name, exc)
        return fallback(call)
    if not cost.family:
        cost = dataclasses.replace(cost, family=family)
    return cost


def out_bytes(call: OpCall, inferred: list[TensorMeta]) -> int:
    """Bytes written: the real outputs when known (live), else the formula's inferred ones."""
    outs = call.outputs if call.outputs is not None else inferred
    return sum(o.nbytes for o in outs if isinstance(o, TensorMeta))


def read_write(flops: float, read: float, written: float, compute: str | None) -> Cost:
    """A formula's cost from the bytes it reads and the bytes it writes, counted apart."""
    return Cost(float(flops), float(read + written), compute, read_bytes=float(read))


def simple(call: OpCall, flops: float, inferred: list[TensorMeta], compute: str | None) -> Cost:
    """The usual case: all tensor inputs read once, all outputs written once."""
    return read_write(flops, call.read_bytes(), out_bytes(call, inferred), compute)
