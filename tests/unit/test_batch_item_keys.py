"""A batch's item idempotency keys (what `memgrid import` sends): each keyed
item is stored once, whatever batch it comes in, on the in-memory fakes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.core.domain.drafts import Draft
from services.core.domain.errors import AlreadyExists, InvalidArgument
from services.core.domain.idempotency import IdempotencyClaim
from services.core.domain.times import to_micros
from services.core.relay import OutboxRelay
from services.core.settings import Settings
from services.ingest.use_cases import IngestHandlers, WritePolicy
from tests.fakes import InMemoryGraph, RecordingPublisher

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def graph() -> InMemoryGraph:
    return InMemoryGraph()


@pytest.fixture
def handlers(graph) -> IngestHandlers:
    ids = iter(f"00000000-0000-4000-8000-{n:012d}" for n in range(1, 10_000))
    relay = OutboxRelay(
        outbox=graph,
        events=RecordingPublisher(connected=True),
        sweep_seconds=1.0,
        grace_seconds=0.0,
        batch_size=100,
        concurrency=4,
        sweeps=False,
        clock=lambda: NOW,
    )
    return IngestHandlers(
        writer=graph,
        relay=relay,
        limits=Settings(_env_file=None).limits,
        policy=WritePolicy(
            auto_summarize=False,
            summary_target_length=300,
            idempotency_ttl_seconds=60,
            delete_page_size=100,
            conflict_retries=3,
        ),
        clock=lambda: NOW,
        new_id=lambda: next(ids),
    )


def drafts(*contents: str) -> list[Draft]:
    return [Draft(content=c, type="Context") for c in contents]


async def test_a_keyed_item_sent_again_in_another_batch_is_answered_not_stored(graph, handlers):
    first = await handlers.batch_create("acme", drafts("a", "b"), item_keys=[("ka", "ha"), ("kb", "hb")])
    assert first.replayed_items == 0 and len(graph.memories) == 2
    # b again, beside a new item and an unkeyed one: only those two are stored.
    again = await handlers.batch_create("acme", drafts("c", "b", "d"), item_keys=[("kc", "hc"), ("kb", "hb"), ("", "")])
    assert again.replayed_items == 1 and len(graph.memories) == 4
    assert again.memories[1].id == first.memories[1].id
    assert [m.content for m in again.memories] == ["c", "b", "d"]
    everything = await handlers.batch_create("acme", drafts("a", "b"), item_keys=[("ka", "ha"), ("kb", "hb")])
    assert everything.replayed and everything.replayed_items == 2 and len(graph.memories) == 4
    # Keys are the tenant's: another tenant's same key stores its own memory.
    await handlers.batch_create("beta", drafts("a"), item_keys=[("ka", "ha")])
    assert len(graph.memories) == 5


async def test_a_key_reused_for_another_item_or_twice_in_a_batch_is_refused(graph, handlers):
    await handlers.batch_create("acme", drafts("a"), item_keys=[("ka", "ha")])
    with pytest.raises(AlreadyExists) as reused:
        await handlers.batch_create("acme", drafts("x", "other"), item_keys=[("", ""), ("ka", "h-other")])
    assert reused.value.reason == "IDEMPOTENCY_KEY_REUSED" and reused.value.details["index"] == "1"
    with pytest.raises(InvalidArgument) as twice:
        await handlers.batch_create("acme", drafts("p", "q"), item_keys=[("kp", "hp"), ("kp", "hq")])
    assert twice.value.reason == "DUPLICATE_IDEMPOTENCY_KEY"
    assert len(graph.memories) == 1  # nothing of the refused batches was written


async def test_a_claim_whose_write_never_happened_is_written_under_its_id(graph, handlers):
    """A request that claimed the key and stopped before its write (a crash
    between the two queries): the next one writes the memory, under the id the claim holds."""
    expires = to_micros(NOW + timedelta(seconds=60))
    lost = await graph.claim_idempotency(
        [(IdempotencyClaim("acme", "ka", "crashed", "ha", expires), ["11111111-0000-4000-8000-000000000000"])],
        to_micros(NOW),
    )
    assert lost == set()
    created = await handlers.batch_create("acme", drafts("a"), item_keys=[("ka", "ha")])
    assert created.memories[0].id == "11111111-0000-4000-8000-000000000000" and created.replayed_items == 0
    again = await handlers.batch_create("acme", drafts("a"), item_keys=[("ka", "ha")])
    assert again.replayed_items == 1 and len(graph.memories) == 1
