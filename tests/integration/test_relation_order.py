"""A memory's relations are listed by kind before strength, on FalkorDB: a
link a user made, then memgrid's similar ones, then temporal adjacency, so
several automatic PRECEDED_BY edges of strength 1.0 never crowd out the
RELATES_TO a user made (what AutoMem's MCP client showed through
expand_relations)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from services.core.domain.model import EventKind, MemoryEvent, Relation
from services.core.domain.times import to_micros
from tests.factories import memory_at

pytestmark = pytest.mark.integration

NOW = datetime(2026, 5, 1, 9, 30, tzinfo=UTC)


async def _seed(writer) -> None:
    ids = ["a", "user", "alike", "t1", "t2", "t3", "t4"]
    memories = [memory_at(i, NOW, tenant="k", content=f"content of {i}") for i in ids]
    events = [MemoryEvent.for_memory(EventKind.CREATED, m, NOW) for m in memories]
    assert await writer.create_memories(memories, events, now_us=to_micros(NOW))
    relations = [Relation("a", f"t{n}", "PRECEDED_BY", 1.0, NOW, {}) for n in range(1, 5)]
    relations += [
        Relation("a", "alike", "SIMILAR_TO", 0.95, NOW, {}),
        Relation("user", "a", "RELATES_TO", 0.6, NOW, {}),
    ]
    events = [MemoryEvent.associated("k", r) for r in relations]
    await writer.create_relations("k", relations, events, now_us=to_micros(NOW))


async def test_relations_are_listed_by_kind_then_strength(graph):
    await _seed(graph.writer)
    listed = (await graph.reader.relations_of("k", ["a"], 3))["a"]
    assert [(r.type, r.strength) for r in listed] == [("RELATES_TO", 0.6), ("SIMILAR_TO", 0.95), ("PRECEDED_BY", 1.0)]
    _, read = await graph.reader.read_memory("k", "a", accessed_us=to_micros(NOW), relation_limit=2)
    assert [r.type for r in read] == ["RELATES_TO", "SIMILAR_TO"]
    near = await graph.reader.neighbours("k", ["a"], types=None, per_memory=2, min_strength=0.0, min_importance=0.0)
    assert [(r.type, memory.id) for r, memory in near] == [("RELATES_TO", "user"), ("SIMILAR_TO", "alike")]
