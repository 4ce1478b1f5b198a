"""Contextual embedding on FalkorDB: a memory is embedded with the memory
written just before it in its scope (services/core/domain/embedding_text.py),
found by the enrichment store and used by the embedding stage."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.core.adapters.embedders import PlaceholderEmbedder
from services.core.domain.embedding_text import contextual_text, preceding_query
from services.core.domain.model import EventKind, MemoryEvent
from services.core.domain.times import to_micros
from services.enrich.embedding import EmbeddingStage
from services.enrich.embedding_texts import EmbeddingContext
from tests.factories import memory_at
from tests.integration.test_embedding_stage import AcceptingRelay

pytestmark = pytest.mark.integration

AT = datetime(2026, 5, 1, 9, 30, tzinfo=UTC)
WINDOW_US = 1800 * 1_000_000


def _turn(memory_id: str, content: str, *, minutes: float = 0, micros: int = 0, tenant: str = "c", tags=("conv-1",)):
    at = AT + timedelta(minutes=minutes)
    return memory_at(
        memory_id, at, tenant=tenant, content=content, tags=list(tags), recorded_at=at + timedelta(microseconds=micros)
    )


async def _store(graph, memories) -> None:
    for memory in memories:
        event = MemoryEvent.for_memory(EventKind.CREATED, memory, AT)
        assert await graph.writer.create_memories([memory], [event], now_us=to_micros(AT))


async def test_the_memory_just_before_is_found_in_its_scope(graph):
    turns = [
        # One session of one time: the order they were recorded in decides.
        _turn("q", "Caroline: I went to a support group yesterday", micros=0),
        _turn("a", "Melanie: Wow, how was it?", micros=1),
        _turn("b", "Caroline: Amazing, everyone was kind", micros=2),
        # Later by timestamp but another conversation's tag; a minute later in this one.
        _turn("other", "Jon: my dance studio", minutes=0.5, tags=("conv-2",)),
        _turn("later", "Melanie: glad to hear", minutes=1),
        # Another tenant at the same moment; an hour later (outside the window).
        _turn("x", "another tenant's turn", micros=1, tenant="d"),
        _turn("far", "Melanie: a new day", minutes=60),
        # No tags of its own: any memory of the tenant before it counts.
        _turn("untagged", "a note", minutes=1, micros=5, tags=()),
    ]
    await _store(graph, turns)
    queries = [preceding_query(t, to_micros(t.timestamp), to_micros(t.recorded_at)) for t in turns if t.tenant == "c"]
    found = await graph.enrichment.preceding_contents("c", queries, WINDOW_US)
    assert found == {
        "a": "Caroline: I went to a support group yesterday",
        "b": "Melanie: Wow, how was it?",
        "later": "Caroline: Amazing, everyone was kind",
        "untagged": "Melanie: glad to hear",
    }
    assert await graph.enrichment.preceding_contents("c", queries, 0) == {}


async def test_the_stage_embeds_a_turn_with_the_one_before_it(graph):
    question, answer = _turn("q", "Caroline: I went to a support group", micros=0), _turn("a", "Yes!", micros=1)
    await _store(graph, [question, answer])
    embedder = PlaceholderEmbedder(384)
    stage = EmbeddingStage(
        store=graph.enrichment, embedder=embedder, relay=AcceptingRelay(), batch_size=4, conflict_retries=3,
        context=EmbeddingContext(1800, 20),
    )  # fmt: skip
    assert await stage.embed_ids("c", ["q", "a"]) == ["a", "q"]
    [alone, with_context] = await embedder.embed(["Caroline: I went to a support group", "Yes!\nCaroline: I went to"])
    assert (await graph.reader.get_memory("c", "q")).embedding == pytest.approx(alone)
    assert (await graph.reader.get_memory("c", "a")).embedding == pytest.approx(with_context)


def test_the_content_comes_first_and_the_context_is_cut():
    assert contextual_text("Yes!", "Caroline: I went", 8) == "Yes!\nCaroline"
    assert contextual_text("Yes!", None, 100) == "Yes!"
    assert contextual_text("Yes!", "   ", 100) == "Yes!"
    assert contextual_text("Yes!", "context", 0) == "Yes!"


async def test_a_forced_enrichment_run_embeds_the_same_text_as_the_stage(graph):
    question, answer = _turn("q", "Caroline: I went to a support group", micros=0), _turn("a", "Yes!", micros=1)
    await _store(graph, [question, answer])
    context = EmbeddingContext(1800, 600)
    assert await context.texts(graph.enrichment, [answer, question]) == [
        "Yes!\nCaroline: I went to a support group",
        "Caroline: I went to a support group",
    ]
    assert await EmbeddingContext().texts(graph.enrichment, [answer]) == ["Yes!"]
    assert await context.texts(graph.enrichment, []) == []
