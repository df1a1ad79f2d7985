"""benchmarks/bench_ranks.py: many synthetic rank traces analysed as one folder, timed, with
the report checked (every rank present, rank 1 the straggler)."""

from __future__ import annotations

import csv
import json

from support.paths import benchmark


def test_a_small_run_writes_checks_and_records(tmp_path, capsys):
    br = benchmark("bench_ranks")
    out = tmp_path / "ranks"
    rc = br.main(
        ["--ranks", "3", "--mb", "0.05", "--dir", str(out), "--csv", str(tmp_path / "r.csv")]
    )
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rc == 0 and row["report_ok"] and row["check"] == "3 rank rows, stragglers [1]"
    assert sorted(p.name for p in out.glob("trace.rank*.json")) == [
        "trace.rank0.json", "trace.rank1.json", "trace.rank2.json"]  # fmt: skip
    (written,) = list(csv.DictReader((tmp_path / "r.csv").open()))
    assert written["ranks"] == "3" and int(written["bytes"]) == row["bytes"] > 100_000
    # the same parameters again: the traces are reused, not written anew
    before = {p: p.stat().st_mtime_ns for p in out.glob("trace.rank*.json")}
    assert br.write_all(out, 3, 0.05) == row["bytes"]
    assert {p: p.stat().st_mtime_ns for p in out.glob("trace.rank*.json")} == before


def test_each_rank_trace_is_about_the_size_asked():
    br = benchmark("bench_ranks")
    kernels = br.kernels_for(1.0, 4)
    size = len(json.dumps(br.rank_events(0, 4, kernels)))
    assert 0.9e6 < size < 1.1e6
