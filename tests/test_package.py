"""The package imports light, and the CLI answers --help and bad input properly."""

from __future__ import annotations

import subprocess
import sys

from membound.cli import main


def test_import_is_light():
    # Importing membound must not import triton or query the GPU (no CUDA init).
    code = (
        "import sys, membound, membound.trace, membound.analysis, membound.report;"
        "assert 'triton' not in sys.modules, 'triton imported';"
        "import torch; assert not torch.cuda.is_initialized(), 'cuda initialised'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_help_lists_verbs(capsys):
    try:
        main(["--help"])
    except SystemExit as exc:
        assert exc.code == 0
    out = capsys.readouterr().out
    assert "roofline" in out


def test_unknown_verb_fails(capsys):
    try:
        main(["no-such-verb"])
    except SystemExit as exc:
        assert exc.code != 0
    else:  # pragma: no cover
        raise AssertionError("argparse accepted an unknown verb")


def test_python_dash_m():
    r = subprocess.run(
        [sys.executable, "-m", "membound", "--version"], capture_output=True, text=True
    )
    assert r.returncode == 0 and "membound" in r.stdout
