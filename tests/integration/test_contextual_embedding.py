"""Contextual embedding on FalkorDB: a memory is embedded with the memories
written just before and just after it in its scope
(services/core/domain/embedding_text.py), found by the enrichment store and
used by the embedding stage, which embeds a neighbour again when new content
changes its text."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.core.adapters.embedders import PlaceholderEmbedder
from services.core.domain.embedding_text import (
    CONTEXT_REFRESH,
    Neighbour,
    Neighbours,
    contextual_text,
    neighbours_to_refresh,
    preceding_query,
)
from services.core.domain.model import EventKind, MemoryEvent
from services.core.domain.times import to_micros
from services.enrich.embedding import EmbeddingStage
from services.enrich.embedding_texts import EmbeddingContext
from services.enrich.pipeline import needs_enrichment
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


def _stage(graph, embedder, context: EmbeddingContext, relay=None) -> EmbeddingStage:
    return EmbeddingStage(
        store=graph.enrichment, embedder=embedder, relay=relay or AcceptingRelay(), batch_size=4,
        conflict_retries=3, context=context,
    )  # fmt: skip


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
    found = await graph.enrichment.neighbours("c", queries, WINDOW_US, following=False)
    assert {i: (n.before.memory_id, n.before.content) for i, n in found.items() if n.before} == {
        "a": ("q", "Caroline: I went to a support group yesterday"),
        "b": ("a", "Melanie: Wow, how was it?"),
        "later": ("b", "Caroline: Amazing, everyone was kind"),
        "untagged": ("later", "Melanie: glad to hear"),
    }
    assert all(n.after is None for n in found.values())
    assert await graph.enrichment.neighbours("c", queries, 0, following=True) == {}


async def test_the_memory_just_after_is_found_in_its_scope(graph):
    turns = [
        _turn("q", "Caroline: I went to a support group yesterday", micros=0),
        _turn("a", "Melanie: Wow, how was it?", micros=1),
        _turn("other", "Jon: my dance studio", minutes=0.5, tags=("conv-2",)),
        _turn("later", "Melanie: glad to hear", minutes=1),
        _turn("far", "Melanie: a new day", minutes=60),
        _turn("x", "another tenant's turn", micros=1, tenant="d"),
    ]
    await _store(graph, turns)
    queries = [preceding_query(t, to_micros(t.timestamp), to_micros(t.recorded_at)) for t in turns if t.tenant == "c"]
    found = await graph.enrichment.neighbours("c", queries, WINDOW_US, following=True)
    # The next one in the same conversation, within the window; never the other tenant's.
    assert {i: n.after.memory_id for i, n in found.items() if n.after} == {"q": "a", "a": "later"}
    assert found["a"] == Neighbours(
        Neighbour("q", "Caroline: I went to a support group yesterday"), Neighbour("later", "Melanie: glad to hear")
    )


async def test_the_stage_embeds_a_turn_with_the_one_before_it(graph):
    question, answer = _turn("q", "Caroline: I went to a support group", micros=0), _turn("a", "Yes!", micros=1)
    await _store(graph, [question, answer])
    embedder = PlaceholderEmbedder(384)
    stage = _stage(graph, embedder, EmbeddingContext(1800, 20))
    assert await stage.embed_ids("c", ["q", "a"]) == ["a", "q"]
    [alone, with_context] = await embedder.embed(["Caroline: I went to a support group", "Yes!\nCaroline: I went to"])
    assert (await graph.reader.get_memory("c", "q")).embedding == pytest.approx(alone)
    assert (await graph.reader.get_memory("c", "a")).embedding == pytest.approx(with_context)


def test_the_content_comes_first_and_the_context_is_cut():
    assert contextual_text("Yes!", "Caroline: I went", 8) == "Yes!\nCaroline"
    assert contextual_text("Yes!", None, 100) == "Yes!"
    assert contextual_text("Yes!", "   ", 100) == "Yes!"
    assert contextual_text("Yes!", "context", 0) == "Yes!"
    assert contextual_text("Yes!", "Did it go well?", 6, "Great, tell me more") == "Yes!\nDid it\nGreat,"
    assert contextual_text("Yes!", None, 100, "Great") == "Yes!\nGreat"


def test_new_content_refreshes_the_neighbours_whose_text_reads_it():
    around = Neighbours(Neighbour("p", "before"), Neighbour("n", "after"))
    # The one after reads a memory as its predecessor; the one before reads it only when texts look ahead.
    assert neighbours_to_refresh({"m": around}, following=True) == ["n", "p"]
    assert neighbours_to_refresh({"m": around}, following=False) == ["n"]
    # Embedded in the same batch (their texts already read it), or embedded now: not again.
    assert neighbours_to_refresh({"m": around}, following=True, skip=["p"]) == ["n"]
    assert neighbours_to_refresh({"m": around, "n": Neighbours(Neighbour("m", "x"))}, following=True) == ["p"]
    assert neighbours_to_refresh({"m": Neighbours()}, following=True) == []


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
    ahead = EmbeddingContext(1800, 600, following=True)
    assert await ahead.texts(graph.enrichment, [question, answer]) == [
        "Caroline: I went to a support group\nYes!",
        "Yes!\nCaroline: I went to a support group",
    ]


class _Relay:
    """Accepts every event and keeps it."""

    def __init__(self):
        self.events: list[MemoryEvent] = []

    async def submit(self, events):
        self.events += events
        return True


async def test_a_successor_arriving_embeds_its_predecessor_again(graph):
    """Turns written one at a time: the question is embedded alone, then again
    with its answer once the answer arrives; the answer is not re-enriched for it."""
    embedder = PlaceholderEmbedder(384)
    relay = _Relay()
    stage = _stage(graph, embedder, EmbeddingContext(1800, 600, following=True), relay=relay)
    question = _turn("q", "Caroline: I went to a support group", micros=0)
    await _store(graph, [question])
    assert await stage.embed_ids("c", ["q"]) == ["q"]
    [alone] = await embedder.embed(["Caroline: I went to a support group"])
    assert (await graph.reader.get_memory("c", "q")).embedding == pytest.approx(alone)

    answer = _turn("a", "Yes!", micros=1)
    await _store(graph, [answer])
    assert await stage.embed_ids("c", ["a"]) == ["a"]
    [with_answer, with_question] = await embedder.embed(
        ["Caroline: I went to a support group\nYes!", "Yes!\nCaroline: I went to a support group"]
    )
    assert (await graph.reader.get_memory("c", "q")).embedding == pytest.approx(with_answer)
    assert (await graph.reader.get_memory("c", "a")).embedding == pytest.approx(with_question)
    assert stage.stats.refreshed == 1
    refreshed = [e for e in relay.events if e.memory_id == "q" and e.reason == CONTEXT_REFRESH]
    assert [e.kind for e in refreshed] == [EventKind.EMBEDDED]
    assert [e.reason for e in relay.events if e.memory_id == "a"] == [""]
    # Enrichment's second stage takes the answer's event, not the question's refresh.
    assert [e.memory_id for e in relay.events if needs_enrichment(e)] == ["q", "a"]
    assert not any(needs_enrichment(e) for e in refreshed)


async def test_a_refresh_never_replaces_a_client_supplied_vector(graph):
    embedder = PlaceholderEmbedder(384)
    stage = _stage(graph, embedder, EmbeddingContext(1800, 600, following=True))
    supplied = [0.5] * 384
    question = _turn("q", "Caroline: I went to a support group", micros=0)
    question.embedding = supplied
    await _store(graph, [question, _turn("a", "Yes!", micros=1)])
    assert await stage.embed_ids("c", ["a"]) == ["a"]
    assert (await graph.reader.get_memory("c", "q")).embedding == pytest.approx(supplied)
    assert stage.stats.refreshed == 0


async def test_a_memory_written_in_between_refreshes_the_one_after_it(graph):
    """Texts read only the memory before: a memory stored later with an
    earlier time becomes the predecessor of one already embedded, whose
    vector is embedded again with it."""
    embedder = PlaceholderEmbedder(384)
    stage = _stage(graph, embedder, EmbeddingContext(1800, 600))
    await _store(graph, [_turn("a", "Yes!", minutes=1)])
    assert await stage.embed_ids("c", ["a"]) == ["a"]
    await _store(graph, [_turn("q", "Caroline: I went to a support group")])
    assert await stage.embed_ids("c", ["q"]) == ["q"]
    [alone, with_question] = await embedder.embed(
        ["Caroline: I went to a support group", "Yes!\nCaroline: I went to a support group"]
    )
    assert (await graph.reader.get_memory("c", "q")).embedding == pytest.approx(alone)
    assert (await graph.reader.get_memory("c", "a")).embedding == pytest.approx(with_question)
    assert stage.stats.refreshed == 1
