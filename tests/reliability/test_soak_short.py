"""`make soak`'s code path for under a minute (benchmarks/soak.py): the whole
mix (writes, recalls, patches, deletes, SSE clients coming and going, a
consolidation pass, a backup) at a small rate on a stack of its own, with
no errors, and a report of every operation's p99 and every process's RSS
(nats-server and FalkorDB included). The hour's run is `make soak ARGS=...`."""

from __future__ import annotations

import json

import pytest

from benchmarks import soak

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(240)]


def test_a_short_soak_runs_the_whole_mix_without_errors(tmp_path):
    out = tmp_path / "soak.json"
    args = soak.parse(
        ["--duration", "40", "--rate", "3", "--warmup", "10", "--sample", "2", "--sse-every", "6"]
        + ["--consolidate-every", "30", "--backup-at", "0.3", "--json", str(out), "--log", str(tmp_path / "stack.log")]
        + ["--live-cap", "40", "--nats-heap-every", "8"]
    )
    result, _ = soak.run(args)  # the RSS verdict needs a longer run; errors and shape are judged here

    assert json.loads(out.read_text())["operations"].keys() == set(soak.KINDS) | set(soak.SCHEDULED)
    for kind, o in result["operations"].items():
        assert o["errors"] == 0, (kind, o["first_errors"])
        assert o["count"] > 0, kind  # every kind ran, the scheduled ones too
        assert 0 < o["p50_ms"] <= o["p99_ms"], kind
    assert result["operations"]["backup"]["count"] == 1
    assert result["sse_events"] > 0  # the SSE clients saw the writes' events
    assert {"recall", "ingest", "gateway", "nats-server", soak.FALKORDB} <= set(result["processes"])
    for name, p in result["processes"].items():
        assert p["baseline_kib"] > 0 and p["max_kib"] >= p["end_kib"] > 0, name
        assert isinstance(p["late_growth"], float) and isinstance(p["late_anon_growth"], float), name
    assert result["late_growth_bound"] == 0.02
    assert 0 < result["live_at_end"] <= 40  # at the cap a write became a delete
    nats = result["processes"]["nats-server"]
    assert nats["block_series_kib"]  # its newest block, its saw matched on
    heap = nats["live_heap_series_kib"]  # its live heap from its profiler, read every 8 s after the warm-up
    assert len(heap) >= 3 and all(0 < kib < nats["max_kib"] for _, kib, _ in heap)
    assert isinstance(nats["late_live_heap_beyond_block_kib"], float)
    assert result["processes"][soak.FALKORDB]["data_series_kib"]  # its data, taken out
    for name, p in result["processes"].items():
        assert p["held_baseline_kib"] > 0 and isinstance(p["late_held_growth"], float), name  # the verdict's measure
    assert result["processes"]["recall"]["index_disk_kib"][0] > 0  # its index's files, the mapped pages' ceiling
    caches = result["recall_caches"]  # recall's caches' fill, read from its /metrics with every sample
    assert {"cache:query_vectors", "cache:word_vectors", "cache:stems", "cache:text_stems"} <= caches.keys()
    assert caches["cache:query_vectors"]["end"] > 0 and caches["cache:text_stems"]["end"] > 0  # the recalls filled them
    assert (tmp_path / "stack.log").exists()  # devstack logs warnings only: a quiet run leaves it empty
