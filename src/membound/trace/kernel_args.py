"""The parameter names of the Triton kernels torch.compile generated in this process, so the
cost model can tell a kernel's inputs from its outputs.

A trace records an inductor kernel's tensor arguments (shapes, dtypes, strides) but not what
each one is. Inductor names them in the kernel's own source: `in_ptr0` is read, `out_ptr0`
written, `in_out_ptr0` read and written in place, a template's `arg_A` read; scalars
(`xnumel`, `ks0`, seeds) follow. The cost model turns the names into reads and writes
(`cost.formulas.inductor.PARAM_ROLES`). The generated modules inductor loaded
(`torch._inductor.codecache.PyCodeCache`) hold every kernel's source, so membound reads the
`def triton_...(...)` lines from their files once, at the end of its ops pass, and keeps the
names of the parameters that are passed at launch (not the `tl.constexpr` ones), in order:
the order the profiler records the arguments in.

Nothing here imports torch or inductor: a process that never compiled has no names. A kernel
name defined twice with different parameters (two compiled graphs that both made a
`triton_poi_fused_add_0`) is left out rather than guessed.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable

_DEF = re.compile(r"def\s+(triton_(?:poi|red|per|tem)_\w+)\s*\(([^)]*)\)")


def parse_kernel_defs(texts: Iterable[str]) -> dict[str, list[str]]:
    """{kernel name: its launch parameters in order} from generated module sources; a name
    defined with two different parameter lists is left out."""
    found: dict[str, list[str]] = {}
    clash: set[str] = set()
    for text in texts:
        for name, params in _DEF.findall(text):
            names = [
                p.split(":", 1)[0].split("=", 1)[0].strip()
                for p in params.split(",")
                if p.strip() and "constexpr" not in p
            ]
            if name in found and found[name] != names:
                clash.add(name)
            found.setdefault(name, names)
    return {k: v for k, v in found.items() if k not in clash}


def inductor_kernel_args() -> dict[str, list[str]]:
    """The launch parameters of every inductor Triton kernel this process loaded, by kernel
    name (`parse_kernel_defs` over the files of `PyCodeCache`'s modules); {} when inductor
    was never imported or keeps its modules elsewhere."""
    codecache = sys.modules.get("torch._inductor.codecache")
    cache = getattr(codecache, "PyCodeCache", None)
    if cache is None:
        return {}
    modules = list(getattr(cache, "modules", None) or [])
    try:
        modules += list((getattr(cache, "modules_no_attr", None) or {}).values())
    except (AttributeError, TypeError):
        pass
    texts, seen = [], set()
    for module in modules:
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or path in seen:
            continue
        seen.add(path)
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                texts.append(f.read())
        except OSError:
            continue
    return parse_kernel_defs(texts)
