"""auto_decompose's sub-queries widen a recall's candidates and the question
alone ranks them (services/recall/widening.py), over the real graph and the
in-process vector index.

The question's vector search is kept shallow (one hit a result) so that a
memory only its sub-query reaches is missing from a plain recall. That
memory was written just after the question's best match, so the
neighbourhood lifts it once it is a candidate, by the question's own cosine.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from services.core.domain.model import EventKind, Memory, MemoryEvent
from services.core.domain.projection import vector_payload
from services.recall.ranked import RankedRecall
from services.recall.vector_arm import VectorArm
from tests.factories import memory_at
from tests.integration import recall_parts

pytestmark = pytest.mark.integration

NOW = datetime(2026, 6, 1, tzinfo=UTC)
QUESTION = "How many children does Melanie have?"
#: The question points one way, every other text (its sub-queries) another.
ASKED, OTHER = [1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]


class TwoWayEmbedder:
    """The question's vector for the question, another for any other text
    (or, `failing`, an error for any other text)."""

    dimension = 4
    name = "test:two-way"

    def __init__(self, failing: bool = False):
        self.failing = failing

    async def embed(self, texts: list[str]) -> list[list[float]]:
        if self.failing and any(text != QUESTION for text in texts):
            raise RuntimeError("the model is gone")
        return [ASKED if text == QUESTION else OTHER for text in texts]


def unit(*values: float) -> list[float]:
    norm = math.sqrt(sum(v * v for v in values))
    return [v / norm for v in values]


def uid(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"recall-widening/{name}"))


MEMORIES = {
    # name: (vector, days before NOW, content); no content holds a word of the question or its names.
    "best": (unit(0.9, 0.0, 0.436, 0.0), 30.0, "We went to the lake"),
    "after_best": (unit(0.53, 0.848, 0.0, 0.0), 30.0 - 1 / 1440, "My son got into an accident"),
    "far_a": (unit(0.6, 0.0, 0.0, 0.8), 20.0, "A note on pottery"),
    "far_b": (unit(0.6, 0.0, 0.0, 0.8), 10.0, "A note on painting"),
}


@pytest.fixture
def embedder() -> TwoWayEmbedder:
    return TwoWayEmbedder()


@pytest.fixture
async def recall(graph, index, settings, embedder) -> RankedRecall:
    memories: list[Memory] = [
        memory_at(uid(name), NOW - timedelta(days=days), tenant="acme", content=content, embedding=vector)
        for name, (vector, days, content) in MEMORIES.items()
    ]
    await graph.writer.create_memories(
        memories, [MemoryEvent.for_memory(EventKind.CREATED, m, NOW) for m in memories], now_us=1
    )
    await index.upsert([(m.id, m.embedding, vector_payload(m)) for m in memories])
    # One hit a result from each arm, a shortlist that keeps them all, the question searched as asked.
    policy = replace(
        settings.recall.policy(settings.limits),
        candidate_multiplier=1, candidate_min=1, shortlist_min=10, nameless_query_share=0.0,
    )  # fmt: skip
    vector = VectorArm(vectors=index, embedder=embedder)
    return recall_parts.ranked(graph, index, policy, clock=lambda: NOW, vector=vector)


def names(outcome) -> list[str]:
    by_id = {uid(name): name for name in MEMORIES}
    return [by_id[c.id] for c in outcome.results]


async def test_a_memory_only_a_sub_query_reaches_joins_scored_by_the_question(recall):
    plain = await recall.search(recall.request("acme", query=QUESTION, limit=2))
    assert names(plain) == ["best", "far_a"]  # far_a and far_b tie at 0.6; the cut goes by id
    assert "widened" not in plain.debug

    widened = await recall.search(recall.request("acme", query=QUESTION, limit=2, auto_decompose=True))
    assert widened.request.queries == (QUESTION,) and widened.request.widening
    assert widened.debug["widened"]["added"] == 1
    assert names(widened) == ["best", "after_best"]
    joined = widened.results[1]
    # Its vector component is the question's cosine (0.53), not its sub-query's (0.85).
    assert joined.components["vector"] == pytest.approx(0.53, abs=1e-3)
    assert joined.components["neighbourhood"] == pytest.approx(widened.results[0].final, abs=1e-6)


async def test_widening_leaves_what_both_find_scored_alike(recall):
    plain = await recall.search(recall.request("acme", query=QUESTION, limit=4))
    widened = await recall.search(recall.request("acme", query=QUESTION, limit=4, auto_decompose=True))
    assert names(widened) == names(plain)  # deep enough, the question's arms found everything already
    assert widened.debug["widened"]["added"] == 0
    assert [c.final for c in widened.results] == [c.final for c in plain.results]


async def test_a_widening_that_fails_leaves_the_questions_own_answer(recall, embedder):
    plain = await recall.search(recall.request("acme", query=QUESTION, limit=2))
    embedder.failing = True
    widened = await recall.search(recall.request("acme", query=QUESTION, limit=2, auto_decompose=True))
    assert names(widened) == names(plain)
    assert any("the model is gone" in reason for reason in widened.debug["degraded"])
