"""Rules between settings, checked when they are read."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from services.core.settings import Settings


def test_document_frequencies_are_counted_again_before_their_counts_expire():
    assert (
        Settings(_env_file=None, recall_df_warm_seconds=120, recall_df_cache_seconds=300).recall.recall_df_cache_seconds
        == 300
    )
    assert (
        Settings(_env_file=None, recall_df_warm_seconds=0, recall_df_cache_seconds=10).recall.recall_df_warm_seconds
        == 0
    )  # never
    with pytest.raises(ValidationError, match="RECALL_DF_WARM_SECONDS"):
        Settings(_env_file=None, recall_df_warm_seconds=300, recall_df_cache_seconds=300)


def test_the_graph_store_trusts_a_count_as_long_as_the_setting_says():
    from services.core.wiring import graph_store

    settings = Settings(_env_file=None, recall_df_cache_seconds=42, recall_df_warm_seconds=30)
    graph = graph_store(settings.graph, settings.process, recall=settings.recall)
    assert graph.text._df_cache.seconds == 42
    assert graph.reader._mention_cache.seconds == 42  # expand_entities' entity mention counts


def test_nats_collects_at_a_low_gogc_and_turns_it_off_only_under_a_limit():
    bus = Settings(_env_file=None).bus
    assert (bus.nats_gogc, bus.nats_memory_limit_mb > 0) == ("25", True)  # the devstack's defaults
    assert Settings(_env_file=None, nats_gogc="50", nats_memory_limit_mb=0).bus.nats_gogc == "50"
    assert Settings(_env_file=None, nats_memory_limit_mb=0).bus.nats_gogc == "25"  # no limit needed
    with pytest.raises(ValidationError, match="NATS_MEMORY_LIMIT_MB"):
        Settings(_env_file=None, nats_gogc="off", nats_memory_limit_mb=0)  # the heap would only grow
    for bad in ("0", "-1", "on", "100%"):
        with pytest.raises(ValidationError, match="nats_gogc"):
            Settings(_env_file=None, nats_gogc=bad)
