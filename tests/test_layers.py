"""The house matches its plan (DESIGN.md, Layout): every import in `src/membound`, function-level
ones included, goes down an allowed edge, and no two modules import each other.

Data flows one way: capture -> load -> analysis -> findings -> report. Each module belongs to
a layer (its sub-package, or for top-level modules the role named in `TOP_LEVEL`); `ALLOWED`
says which layers a layer may import. An import of a package's `__init__` counts as an
import of that package's layer; importing a submodule (`from membound.analysis import
intervals`) is an edge to that submodule, not to the package's `__init__`.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = SRC / "membound"

#: top-level modules' layers
TOP_LEVEL = {
    "membound": "package",  # public names re-exported lazily by string: imports nothing
    "membound.__main__": "cli",
    "membound.cli": "cli",
    "membound.api": "facade",  # membound.profile: capture, then analysis and report
    "membound.roofline": "facade",  # membound.roofline.measure
    "membound.errors": "base",
    "membound.outputs": "base",  # output paths checked before any work starts
    "membound._env": "base",
    "membound._profiling": "base",
    "membound.defaults": "base",
    "membound.dtypes": "base",
}
BELOW_FACADE = {"analysis", "report", "trace", "device", "cost", "base"}
#: layer -> the layers its modules may import (its own layer always)
ALLOWED = {
    "base": set(),
    "device": {"base"},
    "cost": {"base"},
    "trace": {"base"},
    "kernels": {"base"},
    "nn": {"kernels", "base"},
    "data": {"base"},
    "analysis": {"trace", "cost", "device", "base"},
    "report": {"analysis", "cost", "device", "base"},
    "facade": BELOW_FACADE,
    # `import membound` (the lazy public names) only from the layers above the facade
    "demos": BELOW_FACADE | {"facade", "data", "nn", "kernels", "package"},
    "commands": BELOW_FACADE | {"facade", "demos", "data", "nn", "kernels", "package"},
    "cli": {"commands", "base", "package"},
    "package": set(),
}
#: the trace-analysis path runs on machines without torch or a GPU: none of these import
#: torch or triton at module level
NO_TORCH_AT_IMPORT = ("trace", "analysis", "report", "device", "package", "base", "facade")
#: ... except modules that are a kernel themselves, imported only where they run
TORCH_AT_IMPORT_OK = {"membound.device.fma"}  # the FMA-rate kernel of one measurement step


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def layer(module: str) -> str:
    if module in TOP_LEVEL:
        return TOP_LEVEL[module]
    return module.split(".")[1]


def _resolve(name: str) -> str | None:
    """The membound module an imported name lives in (the longest existing prefix)."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name if name in MODULES else None


def imports(module: str) -> list[tuple[str, int, bool]]:
    """(imported membound module, line, at module level) for every import in `module`."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    top = {id(n) for n in tree.body}
    for n in tree.body:  # `if TYPE_CHECKING:` / `try:` blocks at module level are top level too
        for child in ast.walk(n):
            if isinstance(child, ast.Import | ast.ImportFrom):
                top.add(id(child)) if not _in_function(tree, child) else None
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base += f".{node.module}" if node.module else ""
            else:
                base = node.module or ""
            # `from pkg import sub` imports the submodule; `from pkg import name` the package
            names = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names
            ]
        else:
            continue
        for name in names:
            if not name.startswith("membound"):
                continue
            target = _resolve(name)
            if target is not None and target != module:
                out.append((target, node.lineno, id(node) in top))
    return out


def _in_function(tree: ast.AST, target: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            if any(child is target for child in ast.walk(node)):
                return True
    return False


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for module in MODULES:
        for target, _, _ in imports(module):
            edges[module].add(target)
    return edges


def test_every_module_has_a_layer_with_rules():
    unknown = {m: layer(m) for m in MODULES if layer(m) not in ALLOWED}
    assert not unknown, f"modules outside every layer of ALLOWED: {unknown}"


def test_imports_go_down_allowed_edges():
    wrong = []
    for module in MODULES:
        mine = layer(module)
        for target, line, _ in imports(module):
            theirs = layer(target)
            if theirs != mine and theirs not in ALLOWED[mine]:
                wrong.append(f"{module}:{line} ({mine}) imports {target} ({theirs})")
    assert not wrong, "imports against DESIGN's layers:\n" + "\n".join(wrong)


def test_no_command_module_imports_another():
    wrong = [
        f"{m}:{line} imports {t}"
        for m in MODULES
        if m.startswith("membound.commands.")
        for t, line, _ in imports(m)
        if t.startswith("membound.commands.")
    ]
    assert not wrong, "command modules hold no logic another verb could need:\n" + "\n".join(wrong)


def test_no_import_cycles():
    edges = _edges()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(MODULES):
        if module not in index:
            visit(module)
    assert not cycles, "modules that import each other (even inside functions):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


@pytest.mark.parametrize(
    "module",
    [m for m in MODULES if layer(m) in NO_TORCH_AT_IMPORT and m not in TORCH_AT_IMPORT_OK],
)
def test_trace_analysis_path_imports_no_torch_at_module_level(module):
    tree = ast.parse(MODULES[module].read_text())
    heavy = [
        (n.lineno, name)
        for n in tree.body
        if isinstance(n, ast.Import | ast.ImportFrom)
        for name in ([a.name for a in n.names] if isinstance(n, ast.Import) else [n.module or ""])
        if name.split(".")[0] in ("torch", "triton")
    ]
    assert not heavy, f"{module} imports {heavy} at module level"


def test_the_checker_sees_function_level_imports_and_submodules():
    """The rules above would pass vacuously if the walker missed imports."""
    found = {t for t, _, top in imports("membound.commands.analyze") if not top}
    assert "membound.analysis" in found or "membound.analysis.pipeline" in found
    rules = {t for t, _, _ in imports("membound.analysis.rules.copies")}
    assert "membound.analysis.intervals" in rules  # `from membound.analysis import intervals`
    assert layer("membound.analysis.rules.copies") == "analysis"
    assert layer("membound.api") == "facade"
