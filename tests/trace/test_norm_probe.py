"""`trace.norm_probe`: the norm shape a trace recorded, measured after diagnose's script."""

from __future__ import annotations

import json
import shutil
import subprocess
from types import SimpleNamespace

from membound.trace.capture_meta import timeline_in
from membound.trace.load import load_trace
from membound.trace.norm_probe import META_KEY, norm_shape, probe, probe_command
from support.paths import FIXTURES


def test_finds_gpt2s_layernorm_shape():
    # examples/real/gpt2.py: batch 12 x 1024 tokens, hidden 768, the fp32 residual stream
    # normalised under bf16 autocast; 25 LayerNorms x 4 micro-batches x 3 steps recorded
    shape = norm_shape(load_trace(FIXTURES / "h200_real_gpt2" / "trace.ops.json.xz"))
    assert shape == {"kind": "layer", "rows": 12288, "hidden": 768, "dtype": "float32",
                     "autocast": True, "calls": 300}  # fmt: skip
    cmd = probe_command(shape)
    assert cmd[-1] == "--autocast" and cmd[cmd.index("--rows") + 1] == "12288"


def test_a_gpu_only_trace_has_no_shape():
    assert norm_shape(load_trace(timeline_in(FIXTURES / "h200_real_gpt2"))) is None


def _capture(tmp_path):
    for name in ("capture.json", "trace.ops.json.xz"):
        shutil.copy(FIXTURES / "h200_real_gpt2" / name, tmp_path / name)
    return tmp_path / "capture.json"


def test_keeps_the_measurement_in_the_meta(tmp_path):
    meta = _capture(tmp_path)
    result = {
        "aten": {"host_us": 154.0, "gpu_us": 155.8},
        "membound": {"host_us": 411.0, "gpu_us": 86.0},
    }
    seen = {}

    def run(cmd, **kw):
        seen.update(cmd=cmd, **kw)
        return SimpleNamespace(returncode=0, stdout="warning\n" + json.dumps(result), stderr="")

    said = probe(meta, timeout=5, run=run)
    assert seen["timeout"] == 5 and "--hidden" in seen["cmd"]
    kept = json.loads(meta.read_text())[META_KEY]
    assert kept["membound"]["host_us"] == 411.0 and kept["shape"]["rows"] == 12288
    assert "411" in said and "154" in said


def test_a_failed_probe_is_a_note_not_an_error(tmp_path):
    meta = _capture(tmp_path)

    def timeout(cmd, **kw):
        raise subprocess.TimeoutExpired(cmd, kw["timeout"])

    said = probe(meta, timeout=3, run=timeout)
    kept = json.loads(meta.read_text())
    assert "longer than 3 s" in said and "error" in kept[META_KEY]
    assert kept["notes"][-1] == said

    def fails(cmd, **kw):
        return SimpleNamespace(returncode=2, stdout="", stderr="host_cost: no CUDA device\n")

    assert "no CUDA device" in probe(meta, run=fails)
