"""Dtypes, the one table (the vocabulary every layer shares): canonical names, bytes per element, the names a profiler trace
prints, ScalarType codes, and the compute-ceiling key of math in each dtype.

Canonical names are torch's without "torch." ("bfloat16", "float32"); `canonical` maps the
other spellings membound meets onto them (a torch.dtype, "c10::BFloat16", "float", "half").
"""

from __future__ import annotations

from typing import Any

# canonical dtype name (torch.dtype without "torch.") -> bytes per element
ITEMSIZE = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1,
    "float8_e8m0fnu": 1,
    "complex128": 16,
    "complex64": 8,
    "complex32": 4,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "uint16": 2,
    "uint32": 4,
    "uint64": 8,
    "bool": 1,
}

# c10::ScalarType enum values, as a trace records a `ScalarType` argument ("6" = float32).
SCALAR_TYPE_CODES = {
    0: "uint8",
    1: "int8",
    2: "int16",
    3: "int32",
    4: "int64",
    5: "float16",
    6: "float32",
    7: "float64",
    8: "complex32",
    9: "complex64",
    10: "complex128",
    11: "bool",
    15: "bfloat16",
    23: "float8_e5m2",
    24: "float8_e4m3fn",
    25: "float8_e5m2fnuz",
    26: "float8_e4m3fnuz",
}

# C++ type name the profiler prints ("Input type") -> canonical dtype name
TRACE_DTYPES = {
    "float": "float32",
    "double": "float64",
    "c10::Half": "float16",
    "c10::BFloat16": "bfloat16",
    "signed char": "int8",
    "unsigned char": "uint8",
    "short int": "int16",
    "short": "int16",
    "int": "int32",
    "long int": "int64",
    "long": "int64",
    "long long": "int64",
    "bool": "bool",
    "c10::complex<float>": "complex64",
    "c10::complex<double>": "complex128",
    "c10::complex<c10::Half>": "complex32",
    "c10::Float8_e4m3fn": "float8_e4m3fn",
    "c10::Float8_e5m2": "float8_e5m2",
    "c10::Float8_e4m3fnuz": "float8_e4m3fnuz",
    "c10::Float8_e5m2fnuz": "float8_e5m2fnuz",
    "c10::Float8_e8m0fnu": "float8_e8m0fnu",
    "unsigned short": "uint16",
    "unsigned int": "uint32",
    "unsigned long": "uint64",
}

#: the compute-ceiling keys (`device.ceilings.COMPUTE_KEYS`) a dtype name may already be
COMPUTE_KEY_NAMES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")

_COMPUTE = {
    "float64": "fp64",
    "float32": "fp32",
    "float16": "fp16",
    "bfloat16": "bf16",
    "int8": "int8",
    "uint8": "int8",
}
# c10::ScalarType names, as NCCL collective records print a tensor's dtype ("BFloat16")
SCALAR_TYPE_NAMES = {
    "Byte": "uint8",
    "Char": "int8",
    "Short": "int16",
    "Int": "int32",
    "Long": "int64",
    "Half": "float16",
    "Float": "float32",
    "Double": "float64",
    "ComplexHalf": "complex32",
    "ComplexFloat": "complex64",
    "ComplexDouble": "complex128",
    "Bool": "bool",
    "BFloat16": "bfloat16",
    "Float8_e5m2": "float8_e5m2",
    "Float8_e4m3fn": "float8_e4m3fn",
    "Float8_e5m2fnuz": "float8_e5m2fnuz",
    "Float8_e4m3fnuz": "float8_e4m3fnuz",
}
# lower-case and short spellings seen in older traces, kernel names and user input
_ALIASES = {
    **{k.lower(): v for k, v in SCALAR_TYPE_NAMES.items()},
    "bf16": "bfloat16",
    "f16": "float16",
    "f32": "float32",
    "f64": "float64",
}


def compute_key(dtype: str) -> str:
    """Ceiling key (`device.ceilings.COMPUTE_KEYS`) for tensor-core-capable math in `dtype`
    (a canonical name); anything else computes at the fp32 rate."""
    if dtype.startswith("float8"):
        return "fp8"
    return _COMPUTE.get(dtype, "fp32")


def as_dtype(value: Any, default: str | None = None) -> str | None:
    """A dtype given as torch.dtype, ScalarType code (int) or name -> canonical name."""
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return SCALAR_TYPE_CODES.get(value, default)
    text = str(value)
    if text.startswith("torch."):
        text = text[len("torch.") :]
    return text if text in ITEMSIZE else default


def trace_dtype(type_name: str) -> str | None:
    """Profiler type string -> canonical dtype name, None when it is not a tensor type."""
    return TRACE_DTYPES.get(type_name.strip())


#: the floating dtypes membound's after-script probes run their kernels in
PROBED_FLOATS = ("float32", "bfloat16", "float16")


def probed_float(type_name: Any) -> str | None:
    """A profiler type string's canonical name when it is one of `PROBED_FLOATS`, else None
    (also for a type that is not a string: a trace may hold anything)."""
    found = trace_dtype(type_name) if isinstance(type_name, str) else None
    return found if found in PROBED_FLOATS else None


def canonical(value: Any) -> str | None:
    """Any spelling of a dtype membound meets (torch.dtype, canonical name, the profiler's C++
    name, "c10::BFloat16", a ScalarType name "BFloat16", "half", "bf16") -> canonical name;
    None when it is none of them."""
    text = str(value).strip()
    bare = text.removeprefix("torch.").removeprefix("c10::").removeprefix("ScalarType::")
    for t in (text, bare):
        found = TRACE_DTYPES.get(t) or SCALAR_TYPE_NAMES.get(t) or as_dtype(t)
        if found:
            return found
    low = bare.lower()
    return as_dtype(low) or TRACE_DTYPES.get(low) or _ALIASES.get(low)


def itemsize(dtype: str | None, default: int = 4) -> int:
    """Bytes per element of a canonical dtype name (`default` when unknown)."""
    return ITEMSIZE.get(dtype, default) if dtype else default


# ------------------------------------------------------------------- type promotion
# torch's rules, written out so the trace analysis needs no torch (`tests/cost/
# test_flop_formulas.py` checks them against torch.promote_types / torch.result_type)
_KIND = {"bool": 0}
_KIND.update({n: 1 for n in ("uint8", "uint16", "uint32", "uint64")})
_KIND.update({n: 2 for n in ("int8", "int16", "int32", "int64")})
_KIND.update({n: 3 for n in ("float16", "bfloat16", "float32", "float64")})
_KIND.update({n: 4 for n in ("complex32", "complex64", "complex128")})
_COMPLEX_OF = {"float16": "complex32", "bfloat16": "complex64", "float32": "complex64",
               "float64": "complex128"}  # fmt: skip
_FLOAT_OF = {"complex32": "float16", "complex64": "float32", "complex128": "float64"}


def promote_types(a: str, b: str) -> str:
    """torch.promote_types for canonical names (float8 and wide unsigned: either one)."""
    if a == b:
        return a
    ka, kb = _KIND.get(a), _KIND.get(b)
    if ka is None or kb is None:
        return a if ka is None else b
    if ka > kb or (ka == kb and ITEMSIZE[a] > ITEMSIZE[b]):
        a, b, ka, kb = b, a, kb, ka  # b is the "higher" one from here
    if ka == 0:
        return b
    if kb == 4:
        part = (
            promote_types(_FLOAT_OF.get(a, a) if ka == 4 else a, _FLOAT_OF[b])
            if ka >= 3
            else _FLOAT_OF[b]
        )
        return _COMPLEX_OF[part]
    if kb == 3:
        if ka == 3 and {a, b} == {"float16", "bfloat16"}:
            return "float32"
        return b
    if ka == 1 and kb == 2:  # unsigned with signed: the signed one, wide enough for both
        need = 2 * ITEMSIZE[a]
        return b if ITEMSIZE[b] >= need else f"int{8 * need}"
    return b


def _combine(higher: str | None, lower: str | None) -> str | None:
    """c10's combine_categories: a lower-priority group only counts when its kind is higher."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    kh, kl = _KIND.get(higher, 3), _KIND.get(lower, 3)
    if kh == 4:
        return higher
    if kl == 4:
        return _COMPLEX_OF[higher] if kh == 3 else lower
    if kh == 3:
        return higher
    if higher == "bool" or kl == 3:
        return promote_types(higher, lower)
    return higher


def result_type(operands) -> str:
    """torch.result_type over operands given as (canonical dtype, is_zero_dim) for tensors and
    Python types (bool, int, float, complex) for numbers; float32 when there is no tensor."""
    groups: list[str | None] = [None, None, None]  # dim > 0, zero-dim, wrapped numbers
    scalar = {bool: "bool", int: "int64", float: "float32", complex: "complex64"}
    any_tensor = False
    for op in operands:
        if isinstance(op, tuple):
            dtype, zero_dim = op
            any_tensor = True
            g = 1 if zero_dim else 0
        else:
            dtype, g = scalar[op], 2
        groups[g] = dtype if groups[g] is None else promote_types(groups[g], dtype)
    if not any_tensor:
        return "float32"
    return _combine(groups[0], _combine(groups[1], groups[2])) or "float32"
