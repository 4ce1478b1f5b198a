"""The text arms search what a question is about, not how it is asked
(services/core/domain/query_focus.py): over the real graph's full-text
index, a memory that shares only a framing word with the question
("likely") is no keyword hit, and the memory about its subject is."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from services.core.domain.model import EventKind, MemoryEvent
from tests.factories import memory_at
from tests.integration import recall_parts

pytestmark = pytest.mark.integration

NOW = datetime(2026, 6, 1, tzinfo=UTC)
T0 = datetime(2026, 5, 1, tzinfo=UTC)
HEDGE = "It will likely rain all weekend, so the trip is off."
SUBJECT = "We went camping by the lake and the kids loved it."


def uid(i: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"query-focus/{i}"))


async def test_a_framing_word_alone_makes_no_keyword_hit(graph, index, settings):
    memories = [memory_at(uid(i), T0, tenant="focus", content=c) for i, c in enumerate((HEDGE, SUBJECT))]
    events = [MemoryEvent.for_memory(EventKind.CREATED, m, NOW) for m in memories]
    await graph.writer.create_memories(memories, events, now_us=1)
    policy = settings.recall.policy(settings.limits)
    handlers = recall_parts.ranked(graph, index, policy, clock=lambda: NOW)
    outcome = await handlers.search(
        handlers.request("focus", queries=["Would Melanie likely enjoy camping?"], limit=10)
    )
    keyword = {c.id: c.components.get("keyword", 0.0) for c in outcome.results}
    assert keyword.get(uid(1), 0.0) > 0  # "camping"
    assert keyword.get(uid(0), 0.0) == 0  # "likely" is how the question is asked, not what about
