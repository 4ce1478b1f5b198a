"""A content change is enriched again: it leaves the memory unenriched (the
reconciler re-drives it if the events' enrichment dead-letters), and the new
enrichment replaces the old text's derived links instead of adding to them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from services.core.domain.drafts import Draft
from services.core.domain.limits import Limits
from services.core.domain.model import EventKind, MemoryEvent
from services.core.domain.times import to_micros
from services.core.domain.updates import apply_update
from tests.integration.test_falkor_store import T0, memory, put

pytestmark = pytest.mark.integration

LATER = T0 + timedelta(days=1)


async def test_a_content_change_leaves_the_memory_for_the_reconciler(store):
    await put(store, [memory("c1", enriched_at=T0, summary="content of c1")])
    assert await store.enrichment.find_unenriched(to_micros(LATER), 10) == []
    current = await store.reader.get_memory("default", "c1")
    changed, content_changed = apply_update(
        current, Draft(content="entirely new text"), {"content"}, now=LATER, limits=Limits(vector_size=4)
    )
    assert content_changed
    event = MemoryEvent.for_memory(EventKind.UPDATED, changed, LATER, content_changed=True)
    assert await store.writer.update_memory(changed, current.version, event, now_us=to_micros(LATER))
    stored = await store.reader.get_memory("default", "c1")
    assert stored.enriched_at is None and stored.summary == ""
    # Within the grace period after the change the events' path has it; past it, the reconciler.
    assert await store.enrichment.find_unenriched(to_micros(LATER), 10) == []
    assert await store.enrichment.find_unenriched(to_micros(LATER + timedelta(seconds=1)), 10) == [("default", "c1")]


async def edges(store, rel: str, source: str) -> set[str]:
    rows = await store.connection.query(
        f"MATCH (a:Memory {{id: $id}})-[:{rel}]->(b) RETURN coalesce(b.id, b.tag, b.key)", {"id": source}
    )
    return {row[0] for row in rows.result_set}


async def test_a_re_enrichment_replaces_the_similar_to_edges_of_the_old_text(store):
    await put(store, [memory(i) for i in ("s", "old1", "old2", "new1", "other")])
    await store.enrichment.link_similar("default", [("s", "old1", 0.9), ("s", "old2", 0.8)], now_us=1)
    await store.enrichment.link_similar("default", [("other", "old1", 0.7)], now_us=1)
    await store.enrichment.link_similar(
        "default", [("s", "new1", 0.95), ("s", "old2", 0.85)], now_us=2, replace_for=["s"]
    )
    assert await edges(store, "SIMILAR_TO", "s") == {"new1", "old2"}
    assert await edges(store, "SIMILAR_TO", "other") == {"old1"}  # another memory's links stay
    # No neighbours at all this time: none left.
    await store.enrichment.link_similar("default", [], now_us=3, replace_for=["s"])
    assert await edges(store, "SIMILAR_TO", "s") == set()


async def test_a_re_enrichment_replaces_the_mentions_and_patterns_of_the_old_text(store):
    await put(store, [memory(i) for i in ("a", "b", "c")])
    old = [(i, "Decision", ["entity:tools:docker"]) for i in ("a", "b", "c")]
    await store.enrichment.link_entities_and_patterns("default", old, min_members=3, max_members=10, now_us=1)
    assert await edges(store, "MENTIONS", "a") == {"entity:tools:docker"}
    assert await edges(store, "EXEMPLIFIES", "a") == {"Decision|entity:tools:docker"}
    new = [("a", "Decision", ["entity:tools:kubernetes"])]
    await store.enrichment.link_entities_and_patterns(
        "default", new, min_members=3, max_members=10, now_us=2, replace=True
    )
    assert await edges(store, "MENTIONS", "a") == {"entity:tools:kubernetes"}
    assert await edges(store, "EXEMPLIFIES", "a") == set()
    assert await edges(store, "MENTIONS", "b") == {"entity:tools:docker"}  # the others keep theirs
    # Nothing mentioned any more: no mentions left.
    await store.enrichment.link_entities_and_patterns(
        "default", [("a", "Decision", [])], min_members=3, max_members=10, now_us=3, replace=True
    )
    assert await edges(store, "MENTIONS", "a") == set()
