"""The text arms' word statistics are per tenant: document frequencies, the
corpus size behind the common-word bound, and BM25's scores of one tenant
are the same whether or not another tenant's corpus shares the graph."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from services.core.domain.model import EventKind, MemoryEvent
from services.core.wiring import graph_store
from tests.factories import memory_at
from tests.integration import recall_parts

pytestmark = pytest.mark.integration

NOW = datetime(2026, 6, 1, tzinfo=UTC)
T0 = datetime(2026, 5, 1, tzinfo=UTC)
SMALL = ["alpha harbour lighthouse keeper", "alpha harbour", "alpha tide tables"]


def uid(tenant: str, i: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"tenant-statistics/{tenant}/{i}"))


async def put(graph, tenant: str, contents: list[str]) -> None:
    memories = [memory_at(uid(tenant, i), T0, tenant=tenant, content=c) for i, c in enumerate(contents)]
    events = [MemoryEvent.for_memory(EventKind.CREATED, m, NOW) for m in memories]
    for start in range(0, len(memories), 250):
        await graph.writer.create_memories(memories[start : start + 250], events[start : start + 250], now_us=1)


async def recall_small(settings, index) -> tuple[int, list[tuple[str, float, dict]], dict]:
    """A fresh store and handlers (no cached counts): the small tenant's
    bound, and its results with their scores."""
    graph = graph_store(settings.graph, settings.process, recall=settings.recall, backup=settings.backup)
    try:
        # A low floor, so the bound follows the corpus size: 2 alone, 10 if counted over 503 memories.
        tuned = settings.override({"recall_keyword_min_df": 2})
        policy = tuned.recall.policy(tuned.limits)
        arms = recall_parts.text_arms(graph, policy)
        handlers = recall_parts.ranked(graph, index, policy, clock=lambda: NOW, text=arms)
        max_df = await arms.max_df("small")
        outcome = await handlers.search(handlers.request("small", queries=["alpha harbour lighthouse"], limit=10))
        results = [(c.id, round(c.final, 12), dict(c.components)) for c in outcome.results]
        frequencies = await graph.text.document_frequencies("small", "content", ["alpha", "harbour", "lighthouse"])
        return max_df, results, frequencies
    finally:
        await graph.lifecycle.close()


async def test_another_tenants_corpus_changes_neither_the_bound_nor_the_scores(graph, index, settings):
    await put(graph, "small", SMALL)
    alone = await recall_small(settings, index)
    max_df, results, frequencies = alone
    assert max_df == 2 and frequencies == {"alpha": 3, "harbour": 2, "lighthouse": 1}
    assert results and results[0][0] == uid("small", 0)  # harbour and lighthouse: the first memory best

    # 500 memories of another tenant holding the same words.
    await put(graph, "big", [f"alpha harbour lighthouse filler{i}" for i in range(500)])
    assert await recall_small(settings, index) == alone
