"""The add_norm package's layout rules: its modules import one way (no cycle, even through a
function-level import), the reference and the package itself import without triton, and every
file stays under 600 lines."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import membound.kernels.add_norm as pkg

SRC = Path(pkg.__file__).resolve().parents[2]  # .../src/membound
PKG = "membound.kernels.add_norm"


def _modules() -> dict[str, Path]:
    """Module name -> file of the package, the generic launch cache and the custom op."""
    files = {f"{PKG}.{p.stem}": p for p in Path(pkg.__file__).parent.glob("*.py")}
    files[PKG] = files.pop(f"{PKG}.__init__")
    files["membound.kernels._launch"] = SRC / "kernels" / "_launch.py"
    files["membound.nn.add_norm_op"] = SRC / "nn" / "add_norm_op.py"
    return files


def _imports(path: Path, names) -> set[str]:
    """The modules of `names` that `path` imports anywhere (top level or inside a function)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:  # `from pkg import module` imports the module
                sub = f"{node.module}.{a.name}"
                found.add(sub if sub in names else node.module)
    return {n for n in found if n in names}


def test_modules_import_one_way():
    mods = _modules()
    graph = {m: _imports(p, mods) - {m} for m, p in mods.items()}
    assert graph[f"{PKG}._jit"] == set()  # the shared helpers import no other module
    # the package's lazy re-exports are for users: its modules import each other directly
    assert not [m for m, deps in graph.items() if PKG in deps]

    def reach(m, seen):
        for n in graph[m]:
            if n not in seen:
                seen.add(n)
                reach(n, seen)
        return seen

    cycles = [m for m in graph if m in reach(m, set())]
    assert not cycles, {m: sorted(graph[m]) for m in cycles}


def test_files_stay_under_600_lines():
    for name, path in _modules().items():
        assert len(path.read_text().splitlines()) < 600, name


def test_the_package_and_its_reference_import_without_triton():
    code = (
        "import sys, membound.kernels.add_norm as K, membound.kernels.add_norm.ref;"
        "from membound.kernels.add_norm import add_norm_ref, dropout_keep_ref;"
        "import membound.nn.add_norm_op;"
        "print('triton' in sys.modules, sorted(K.__all__) == K.__all__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]
