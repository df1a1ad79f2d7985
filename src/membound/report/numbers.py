"""Numbers as every report prints them: a figure that is missing or not finite (None, NaN,
inf: a trace can hold anything) prints as `DASH`, never as "nan%" and never as a crash."""

from __future__ import annotations

import math

DASH = "-"


def finite(x) -> bool:
    """A real number that can be printed (bools are not figures)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def value(x, default: float = 0.0) -> float:
    """`x` where it is finite, else `default` (for arithmetic that draws, e.g. a bar)."""
    return float(x) if finite(x) else default


def pct(x, signed: bool = False) -> str:
    """A fraction as a whole percentage (0.42 -> 42%, signed: +42%)."""
    if not finite(x):
        return DASH
    return f"{x:+.0%}" if signed else f"{x:.0%}"


def ms(x, digits: int = 3) -> str:
    """A time in ms with `digits` decimals."""
    return f"{x:.{digits}f}" if finite(x) else DASH


def num(x, spec: str = ".3g") -> str:
    """Any figure, by a format spec."""
    return format(x, spec) if finite(x) else DASH
