"""ensure_schema's migration on a real FalkorDB: the factuality an earlier
release's enrichment wrote into metadata moves to its own property, a window
of node ids at a time, idempotently, leaving a client's own
metadata.factuality alone."""

from __future__ import annotations

import json

import pytest

from services.core.domain.model import EventKind, MemoryEvent
from tests.integration.test_falkor_store import T0, memory

pytestmark = pytest.mark.integration

LEGACY = {"label": "UNVERIFIED", "confidence": 0.56, "rationale": "source trust 0.70; specific details: none"}


async def stored(store, memory_id: str) -> tuple[dict, str | None, int]:
    """(metadata, factuality property, version) as the node holds them, past row_to_memory."""
    result = await store.connection.query(
        "MATCH (n:Memory {id: $id}) RETURN n.metadata, n.factuality, n.version", {"id": memory_id}
    )
    [(metadata, factuality, version)] = result.result_set
    return json.loads(metadata), factuality, version


async def test_legacy_factuality_moves_out_of_metadata_in_pages(store):
    """Also a record of the client's own (never enriched, or not enrichment's
    shape) is left as it is, and a second pass finds nothing to do."""
    legacy = [
        memory(f"f-{i:02}", tenant="ab"[i % 2], enriched_at=T0, metadata={"source": "slack", "factuality": LEGACY})
        for i in range(7)
    ]
    mine = {"factuality": {"label": "FACT", "confidence": 1, "rationale": "I say so", "by": "me"}}
    kept = [
        memory("k-unenriched", metadata={"factuality": LEGACY}),  # never enriched: the client's own
        memory("k-shape", enriched_at=T0, metadata=mine),  # enriched, but not enrichment's shape
        memory("k-new", enriched_at=T0, metadata={"n": 1}, factuality=LEGACY),  # already the new shape
    ]
    everything = legacy + kept
    events = [MemoryEvent.for_memory(EventKind.CREATED, m, T0) for m in everything]
    await store.writer.create_memories(everything, events, now_us=1)
    assert (await stored(store, "f-00"))[:2] == ({"source": "slack", "factuality": LEGACY}, None)

    # Windows of three node ids: the ten records take four queries, each reading only its window.
    reads = []
    real_query = store.connection.query

    async def counting(cypher, params=None, **kwargs):
        if "id(n) >= $start" in cypher:
            reads.append(params)
        return await real_query(cypher, params, **kwargs)

    store.connection.query = counting
    assert await store.lifecycle.migrate_factuality(page_size=3) == 7
    store.connection.query = real_query
    assert len(reads) >= 3 and all(r["stop"] - r["start"] == 3 for r in reads)
    for m in legacy:
        metadata, factuality, version = await stored(store, m.id)
        assert metadata == {"source": "slack"} and json.loads(factuality) == LEGACY, m.id
        assert version == m.version  # no write anyone must react to: the vector payload already had the label
        read = await store.reader.get_memory(m.tenant, m.id)
        assert read.metadata == {"source": "slack"} and read.factuality == LEGACY
    assert (await stored(store, "k-unenriched"))[:2] == ({"factuality": LEGACY}, None)
    assert (await stored(store, "k-shape"))[:2] == (mine, None)
    assert (await store.reader.get_memory("default", "k-shape")).metadata == mine
    assert (await stored(store, "k-new"))[0] == {"n": 1}

    # Idempotent, and part of ensure_schema.
    assert await store.lifecycle.migrate_factuality(page_size=3) == 0
    await store.connection.query(
        "MATCH (n:Memory {id: 'f-03'}) SET n.metadata = $m REMOVE n.factuality",
        {"m": json.dumps({"factuality": LEGACY})},
    )
    await store.lifecycle.ensure_schema()
    metadata, factuality, _ = await stored(store, "f-03")
    assert metadata == {} and json.loads(factuality) == LEGACY
    assert await store.lifecycle.migrate_factuality() == 0
