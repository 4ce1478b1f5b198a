"""Ingest's use cases on in-memory fakes of its ports (MemoryWriter, Outbox,
EventPublisher): the rules of the write path without servers. The same
store rules are held equal to FalkorDB's in tests/integration/test_fake_congruence.py."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from services.core.domain.drafts import Draft
from services.core.domain.errors import Aborted, AlreadyExists, InvalidArgument, NotFound, ResourceExhausted
from services.core.domain.model import EventKind
from services.core.relay import OutboxRelay
from services.core.settings import Settings
from services.ingest.associate import AssociationDraft
from services.ingest.use_cases import IngestHandlers, WritePolicy
from tests.fakes import InMemoryGraph, RecordingPublisher, outbox_size

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class RacingGraph(InMemoryGraph):
    """A store where another writer changes each memory just before every update (once racing)."""

    racing: bool = False

    async def update_memory(self, memory, expected_version, event, *, now_us, before=None):
        key = (memory.tenant, memory.id)
        if self.racing:
            self.memories[key] = replace(self.memories[key], version=self.memories[key].version + 1)
        return await super().update_memory(memory, expected_version, event, now_us=now_us, before=before)


class Rig:
    """Handlers over one fake graph and bus, with a clock and ids under the test's control."""

    def __init__(
        self,
        *,
        graph: InMemoryGraph | None = None,
        bus_up: bool = True,
        delete_page_size: int = 100,
        conflict_retries: int = 3,
    ):
        self.graph = graph or InMemoryGraph()
        self.bus = RecordingPublisher(connected=bus_up)
        self.now = NOW
        self._ids = iter(f"00000000-0000-4000-8000-{n:012d}" for n in range(1, 10_000))
        self.relay = OutboxRelay(
            outbox=self.graph,
            events=self.bus,
            sweep_seconds=1.0,
            grace_seconds=0.0,
            batch_size=100,
            concurrency=4,
            sweeps=False,
            clock=lambda: self.now,
        )
        self.handlers = IngestHandlers(
            writer=self.graph,
            relay=self.relay,
            limits=Settings(_env_file=None).limits,
            policy=WritePolicy(
                auto_summarize=False,
                summary_target_length=300,
                idempotency_ttl_seconds=60,
                delete_page_size=delete_page_size,
                conflict_retries=conflict_retries,
            ),
            clock=lambda: self.now,
            new_id=lambda: next(self._ids),
        )

    async def settle(self) -> None:
        """Let the relay publish what was submitted and clear what the bus acknowledged."""
        await self.relay.stop()


async def test_a_create_is_stored_with_its_event_published_and_cleared_from_the_outbox():
    rig = Rig()
    created = await rig.handlers.create_memory("acme", Draft(content="Chose PostgreSQL for ACID", tags=["db"]))
    await rig.settle()
    memory = created.memory
    assert (await rig.graph.get_memory("acme", memory.id)).content == "Chose PostgreSQL for ACID"
    assert await rig.graph.get_memory("other", memory.id) is None
    assert [(e.kind, e.memory_id) for e in rig.bus.published] == [(EventKind.CREATED, memory.id)]
    assert await outbox_size(rig.graph) == 0
    assert created.published


async def test_a_write_while_the_bus_is_down_is_kept_in_the_outbox():
    rig = Rig(bus_up=False)
    created = await rig.handlers.create_memory("acme", Draft(content="written while NATS is down"))
    await rig.settle()
    assert not created.published
    assert await rig.graph.get_memory("acme", created.memory.id) is not None
    pending = await rig.graph.pending_outbox(older_than_us=2**62, limit=10)
    assert [e.event.memory_id for e in pending] == [created.memory.id]
    rig.bus.connected = True
    rig.now += timedelta(seconds=1)  # the sweep takes what is older than its grace period
    assert await rig.relay.sweep() == 1
    assert await outbox_size(rig.graph) == 0


async def test_an_idempotency_key_replays_the_first_result_and_refuses_another_request():
    rig = Rig()
    first = await rig.handlers.create_memory("acme", Draft(content="once"), idempotency_key="k", request_hash="h1")
    again = await rig.handlers.create_memory("acme", Draft(content="once"), idempotency_key="k", request_hash="h1")
    assert again.replayed and again.memory.id == first.memory.id
    assert await rig.graph.count_memories("acme") == 1
    with pytest.raises(AlreadyExists) as refused:
        await rig.handlers.create_memory("acme", Draft(content="other"), idempotency_key="k", request_hash="h2")
    assert refused.value.reason == "IDEMPOTENCY_KEY_REUSED"
    # Another tenant's key of the same name is its own.
    other = await rig.handlers.create_memory("beta", Draft(content="once"), idempotency_key="k", request_hash="h2")
    assert not other.replayed


async def test_an_expired_key_is_forgotten():
    rig = Rig()
    await rig.handlers.create_memory("acme", Draft(content="once"), idempotency_key="k", request_hash="h1")
    rig.now = NOW + timedelta(seconds=61)
    later = await rig.handlers.create_memory("acme", Draft(content="twice"), idempotency_key="k", request_hash="h2")
    assert not later.replayed
    assert await rig.graph.count_memories("acme") == 2


async def test_the_quota_refuses_a_write_past_the_limit_and_writes_nothing():
    rig = Rig()
    await rig.handlers.create_memory("acme", Draft(content="first"), memory_limit=2)
    with pytest.raises(ResourceExhausted) as refused:
        await rig.handlers.batch_create("acme", [Draft(content="a"), Draft(content="b")], memory_limit=2)
    assert refused.value.reason == "MEMORY_LIMIT_EXCEEDED"
    assert await rig.graph.count_memories("acme") == 1


async def test_a_batch_with_one_bad_item_names_it_and_writes_nothing():
    rig = Rig()
    with pytest.raises(InvalidArgument) as refused:
        await rig.handlers.batch_create("acme", [Draft(content="fine"), Draft(content="  ")])
    assert "index 1" in refused.value.message
    assert await rig.graph.count_memories("acme") == 0
    assert await outbox_size(rig.graph) == 0


async def test_an_update_bumps_the_version_and_a_memory_that_keeps_changing_is_aborted():
    rig = Rig(graph=RacingGraph(), conflict_retries=2)
    memory = (await rig.handlers.create_memory("acme", Draft(content="v1"))).memory
    updated, content_changed = await rig.handlers.update_memory("acme", memory.id, Draft(content="v2"), {"content"})
    assert content_changed and updated.version == memory.version + 1
    assert (await rig.graph.get_memory("acme", memory.id)).content == "v2"

    # Every compare-and-set loses to a concurrent writer.
    rig.graph.racing = True
    with pytest.raises(Aborted) as aborted:
        await rig.handlers.update_memory("acme", memory.id, Draft(content="v3"), {"content"})
    assert aborted.value.reason == "CONCURRENT_UPDATE"


async def test_delete_and_delete_by_tag_remove_every_page_and_only_the_tenants():
    rig = Rig(delete_page_size=2)
    for n in range(5):
        await rig.handlers.create_memory("acme", Draft(content=f"tagged {n}", tags=["Old"]))
    await rig.handlers.create_memory("beta", Draft(content="theirs", tags=["old"]))
    assert await rig.handlers.delete_by_tags("acme", ["OLD"]) == 5
    assert await rig.graph.count_memories("acme") == 0
    assert await rig.graph.count_memories("beta") == 1
    with pytest.raises(NotFound):
        await rig.handlers.delete_memory("acme", "00000000-0000-4000-8000-000000000006")  # beta's memory


async def test_associate_defaults_and_names_the_missing_end():
    rig = Rig()
    a = (await rig.handlers.create_memory("acme", Draft(content="a"))).memory
    b = (await rig.handlers.create_memory("acme", Draft(content="b"))).memory
    outcome = await rig.handlers.associate(
        "acme", [AssociationDraft(memory1_id=a.id, memory2_id=b.id, type=None)], single=True
    )
    [(index, relation)] = outcome.created
    assert (index, relation.type, relation.strength) == (0, "RELATES_TO", 0.5)
    assert [r.type for r in rig.graph.relations("acme")] == ["RELATES_TO"]
    missing = "00000000-0000-4000-8000-000000000999"
    with pytest.raises(NotFound) as refused:
        await rig.handlers.associate(
            "acme", [AssociationDraft(memory1_id=a.id, memory2_id=missing, type=None)], single=True
        )
    assert refused.value.field == "memory2_id"
    batch = await rig.handlers.associate(
        "acme",
        [
            AssociationDraft(memory1_id=missing, memory2_id=b.id, type=None),
            AssociationDraft(memory1_id=b.id, memory2_id=a.id, type=None),
        ],
        single=False,
    )
    assert [i for i, _ in batch.created] == [1] and [i for i, _ in batch.failed] == [0]


async def test_supersede_stores_the_replacement_closes_the_old_and_links_them():
    rig = Rig()
    old = (await rig.handlers.create_memory("acme", Draft(content="We use MySQL"))).memory
    rig.now = NOW + timedelta(hours=1)
    result = await rig.handlers.supersede(
        "acme", old.id, Draft(content="We use PostgreSQL"), relation="INVALIDATED_BY", reason="migrated"
    )
    await rig.settle()
    closed = await rig.graph.get_memory("acme", old.id)
    assert closed.t_invalid == rig.now and closed.version == old.version + 1
    [edge] = rig.graph.relations("acme")
    assert (edge.source_id, edge.type, edge.target_id) == (old.id, "INVALIDATED_BY", result.replacement.id)
    kinds = [e.kind for e in rig.bus.published if e.memory_id in (old.id, result.replacement.id)]
    assert EventKind.SUPERSEDED in kinds and kinds.count(EventKind.CREATED) == 2
    with pytest.raises(NotFound):
        await rig.handlers.supersede("beta", old.id, Draft(content="not theirs"), relation=None, reason="")
