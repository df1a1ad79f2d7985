"""Helpers the tests import (`from support import tracebuilder`): pytest puts `tests/` on
`sys.path` (`pythonpath` in pyproject.toml), so no test edits `sys.path` itself."""
