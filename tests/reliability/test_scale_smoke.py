"""The scale benchmark's code path (benchmarks/scale.py) at 10k memories: the
same loader, rebuild, recall kinds, create, memory and backup-and-restore
figures as the 1M run, on a stack of its own; the report has its shape and
its figures are sane (`make bench ARGS="--only scale"` makes the real ones).
Backup and restore run at the first size (1k): the same code path, without
a second 10k projection into the restoring stack; the stacks settle for at
most 10 s before their recall figures (a figure's sanity is judged here,
not its value). 324 s before; now 138 s on the loaded shared machine,
79 s at a load average of 2-4."""

from __future__ import annotations

import json

import pytest

from benchmarks import scale

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(420)]


def test_the_scale_run_reports_every_figure_at_two_sizes(tmp_path):
    out = tmp_path / "scale.json"
    # A vocabulary of its own: the LoCoMo file lives outside the repository (../shared), which a clone lacks.
    report = scale.run(
        (1_000, 10_000),
        queries=20,
        creates=5,
        backup_sizes=(1_000,),
        json_path=out,
        settle_seconds=10,
        warmup=3,
        words_from="random",
    )

    assert json.loads(out.read_text())["sizes"].keys() == {"1000", "10000"}  # written as it went
    for size, figures in report["sizes"].items():
        # Every memory the graph holds is a point: the seeded ones and the earlier sizes' creates.
        assert size <= figures["rebuild"]["points"] <= size + 5
        assert figures["rebuild"]["points_per_second"] > 0
        assert figures["seeded"]["memories"] == size and figures["seeded"]["edges"] > size
        assert set(figures["recall"]) == set(scale.KINDS)
        for kind, q in figures["recall"].items():
            assert 0 < q["p50"] <= q["p95"] <= q["p99"] < 10_000, kind
            assert q["results"] > 0, kind  # every kind finds something
            assert q["hits"]["vector"] > 0 and q["hits"]["found"] >= q["results"], kind  # the arms' counts
            # Where the time went: recall's own stage timings, each within the whole request's.
            assert {"embed", "vector_search", "keyword_arm"} <= set(q["stages"]), kind
            assert all(0 <= s["p50"] <= q["p99"] for s in q["stages"].values()), kind
        # The expansions add memories, so the figure is seen to expand.
        assert figures["recall"]["expand_entities"]["expanded"] > 0
        assert figures["recall"]["expand_relations"]["expanded"] > 0
        assert 0 < figures["create"]["p50"] <= figures["create"]["p99"]
        memory = figures["memory"]
        assert {"recall", "falkordb", "falkordb-data", "nats-server", "vector-shard-disk"} <= set(memory)
        assert all(m["bytes_per_memory"] > 0 for m in memory.values())
    backup = report["sizes"][1_000]["backup"]
    assert backup["backup_seconds"] > 0 and backup["archive_mb"] > 0
    assert backup["restored_indexed"] >= 1_000  # the restored stack's index holds every memory
    assert "backup" not in report["sizes"][10_000]
    assert {v["bound"] for v in report["verdicts"].values()} == {2.0, 1.5, 0.8}
    assert len(report["verdicts"]) == 2 * len(scale.KINDS) - 1 + 2
    assert all(isinstance(v["ok"], bool) and v["ratio"] > 0 for v in report["verdicts"].values())
