"""benchmarks/probe_compile_host.py: its models train on any device; without CUDA it says so."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from support.paths import benchmark


@pytest.mark.parametrize("kind", ["mlp", "cnn", "tf"])
def test_each_model_takes_its_batch_and_learns(kind):
    """A few SGD steps on the probe's fixed batch lower the loss: the models and batches fit
    together at every depth the probe builds."""
    probe = benchmark("probe_compile_host")
    torch.manual_seed(0)
    for depth in (1, 3):
        model = probe.MODELS[kind](depth)
        x, y = probe.batch(kind, "cpu")
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        losses = []
        for _ in range(8):
            opt.zero_grad()
            out = model(x)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y)
            loss.backward()
            opt.step()
            losses.append(float(loss))
        assert losses[-1] < losses[0], (kind, depth, losses)


def test_without_cuda_it_exits_2_with_one_line(monkeypatch, capsys):
    probe = benchmark("probe_compile_host")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert probe.main([]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["probe_compile_host: needs a CUDA device"]
