"""`input-starved` against the planted input pipeline (hand-computed numbers)."""

from __future__ import annotations

import pytest

from support.analysis import by_code, run


def test_input_starved_in_the_input_pipeline(ceilings):
    a = run("synthetic_input_pipeline", ceilings)
    assert [f.code for f in a.findings] == ["input-starved", "pageable-copy", "host-sync"]
    f = by_code(a)["input-starved"]
    assert f.time_lost_ms_per_step == pytest.approx(1.0)
    assert f.share_of_step == pytest.approx(0.2)
    assert f.spans == [(0.0, 1000.0), (5000.0, 6000.0)]


@pytest.mark.parametrize("rows,per_row", [(64, True), (2, False)])
def test_a_loader_that_takes_rows_one_at_a_time(tmp_path, rows, per_row):
    """Two steps of 1000 µs, each starting with 400 µs inside a single-process loader's
    `__next__` that runs `rows` aten::select and one aten::stack (a TensorDataset under the
    default collate takes each row by select), then a 500-µs kernel. At 64 row ops a batch
    the finding says so and names whole-batch indexing first; at 2 it names workers."""
    from membound.analysis import analyze
    from membound.analysis.remedies import remedies_of
    from support.tracebuilder import TraceBuilder

    b = TraceBuilder()
    for s in range(2):
        t = s * 1000.0
        b.step(s, t, 1000)
        b.dataloader(t, 400)
        for r in range(rows):
            b.op("aten::select", t + 10 + r * 5, 2)
        b.op("aten::stack", t + 380, 10)
        b.launch("k", t + 410, t + 420, 500)
    a = analyze([b.write(tmp_path / "trace.json.gz")], None)
    f = by_code(a)["input-starved"]
    assert f.evidence["row_ops_per_batch"] == rows
    assert f.evidence["per_row_collate"] is per_row
    assert ("BatchSampler" in f.fix) is per_row and "num_workers>0" in f.fix
    first = remedies_of(f.code, f.evidence)[0]
    assert first == ("batch_index" if per_row else "workers")
