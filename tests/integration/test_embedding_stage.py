"""The embedding stage (enrich's first) against the real graph and bus: it
makes a memory searchable by vector before entities and links are done, it
never gives changed content the old text's vector, it passes client-supplied
vectors on without embedding, and the reconciler re-drives both stages."""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from google.protobuf import struct_pb2

from memgrid.v1 import enrich_service_pb2, enrich_service_pb2_grpc, recall_service_pb2, recall_service_pb2_grpc
from services.core.adapters.embedders import PlaceholderEmbedder
from services.core.adapters.nats_consumer import Outcome
from services.core.adapters.spacy_entities import SpacyEntityExtractor
from services.core.domain.model import EventKind, Memory, MemoryEvent
from services.core.domain.times import to_micros
from services.core.grpc.server import start
from services.enrich.bootstrap import build_app as build_enrich
from services.enrich.embedding import EmbeddingStage
from tests.conftest import plane_of, signed
from tests.factories import memory_at
from tests.integration.enrich_stack import EnrichStack
from tests.integration.test_enrichment import enrich_settings
from tests.integration.test_enrichment_batches import AcceptingRelay, store_memories
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

TENANT = "acme"


class CountingEmbedder:
    """The placeholder embedding, noting every text it embeds."""

    def __init__(self):
        self._inner = PlaceholderEmbedder(384)
        self.dimension = 384
        self.name = self._inner.name
        self.texts: list[str] = []

    async def embed(self, texts):
        self.texts += texts
        return await self._inner.embed(texts)


class HeldExtractor:
    """The rule-based extractor, held until the test lets it go: the second stage stalls."""

    def __init__(self):
        self._inner = SpacyEntityExtractor.blank_english()
        self.release = threading.Event()

    def extract_many(self, texts):
        if texts != ["warm up"]:
            self.release.wait(30)
        return self._inner.extract_many(texts)


async def start_enrich(stack: EnrichStack, **overrides) -> None:
    stack.services["enrich"] = await start(
        "enrich",
        build_enrich(stack.settings, **overrides),
        host="127.0.0.1",
        port=0,
        grace_seconds=1.0,
        plane=plane_of(stack.settings),
    )


async def search(stack: EnrichStack, vector, tenant: str = TENANT) -> list[str]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{stack.services['recall'].port}") as channel:
        recall = recall_service_pb2_grpc.RecallServiceStub(channel)
        reply = await recall.SearchMemories(
            recall_service_pb2.SearchMemoriesRequest(embedding=vector, limit=3), metadata=signed(tenant)
        )
        return [r.memory.id for r in reply.results]


async def enrichment_status(stack: EnrichStack) -> dict:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{stack.services['enrich'].port}") as channel:
        enrich = enrich_service_pb2_grpc.EnrichServiceStub(channel)
        reply = await enrich.GetEnrichmentStatus(
            enrich_service_pb2.GetEnrichmentStatusRequest(), metadata=signed(TENANT)
        )
        return {"pending": reply.pending, "processed": reply.processed, **json.loads(reply.stats_json)}


async def until(check, within: float = 20.0):
    for _ in range(int(within / 0.05)):
        if found := await check():
            return found
        await asyncio.sleep(0.05)
    raise AssertionError("not reached in time")


async def test_a_memory_is_searchable_by_vector_before_entities_and_links(falkordb_server, nats_server, tmp_path):
    stack = EnrichStack(enrich_settings(falkordb_server.port, nats_server.port, tmp_path / "data"))
    extractor = HeldExtractor()
    try:
        await stack.start("recall", "ingest")
        await start_enrich(stack, extractor=extractor)
        content = "The staging cluster runs on Kubernetes"
        memory_id = await stack.create(content, type="Context")
        [vector] = await PlaceholderEmbedder(384).embed([content])

        async def searchable():
            return memory_id in await search(stack, vector)

        await until(searchable)
        memory = await stack.store.reader.get_memory(TENANT, memory_id)
        assert memory.enriched_at is None and memory.embedding is not None  # the second stage is still held
        assert memory.version == 2
        status = await enrichment_status(stack)
        assert status["embedding"]["embedded"] == 1 and status["embedding"]["pending"] == 0
        assert status["pending"] == 1  # not enriched yet

        extractor.release.set()
        enriched = (await stack.wait_enriched([memory_id]))[memory_id]
        assert "entity:tools:kubernetes" in enriched.tags
        assert enriched.embedding == memory.embedding  # the second stage kept the stage's vector
        assert enriched.metadata["enrichment"]["embedding_model"] == "placeholder"
        assert memory_id in await search(stack, vector)
    finally:
        extractor.release.set()
        await stack.close()


async def test_a_client_supplied_embedding_is_not_embedded_again_but_is_enriched(
    falkordb_server, nats_server, tmp_path
):
    stack = EnrichStack(enrich_settings(falkordb_server.port, nats_server.port, tmp_path / "data"))
    embedder = CountingEmbedder()
    try:
        await stack.start("recall", "ingest")
        await start_enrich(stack, embedder=embedder)
        [vector] = await PlaceholderEmbedder(384).embed(["a vector from elsewhere"])
        embedding = struct_pb2.Value(
            list_value=struct_pb2.ListValue(values=[struct_pb2.Value(number_value=v) for v in vector])
        )
        memory_id = await stack.create("Our CI runs pytest on Docker", type="Context", embedding=embedding)
        memory = (await stack.wait_enriched([memory_id]))[memory_id]
        assert {"entity:tools:pytest", "entity:tools:docker"} <= set(memory.tags)
        assert memory.embedding == pytest.approx(vector)
        assert memory.metadata["enrichment"]["embedding_model"] is None  # the client's vector
        assert "Our CI runs pytest on Docker" not in embedder.texts
        status = await enrichment_status(stack)
        assert status["embedding"]["passed"] == 1 and status["embedding"]["embedded"] == 0
    finally:
        await stack.close()


class ChangingEmbedder:
    """While it embeds, someone changes the memory's content (a PATCH in between)."""

    def __init__(self, graph, memory_id: str):
        self._graph = graph
        self._memory_id = memory_id
        self.dimension = 384
        self.name = "placeholder"

    async def embed(self, texts):
        current = await self._graph.reader.get_memory(TENANT, self._memory_id)
        changed = replace(
            current, content="Changed meanwhile to Terraform", embedding=None, version=current.version + 1
        )
        event = MemoryEvent.for_memory(EventKind.UPDATED, changed, datetime.now(UTC), content_changed=True)
        assert await self._graph.writer.update_memory(changed, current.version, event, now_us=1)
        return await PlaceholderEmbedder(384).embed(texts)


def stage_on(graph, embedder) -> EmbeddingStage:
    return EmbeddingStage(
        store=graph.enrichment, embedder=embedder, relay=AcceptingRelay(), batch_size=4, conflict_retries=3
    )


async def test_a_content_change_while_embedding_never_gets_the_old_vector(graph):
    [memory_id] = await store_memories(graph, 1)
    stage = stage_on(graph, ChangingEmbedder(graph, memory_id))

    assert await stage.embed_ids(TENANT, [memory_id]) == []

    current = await graph.reader.get_memory(TENANT, memory_id)
    assert current.content == "Changed meanwhile to Terraform" and current.embedding is None
    assert stage.stats.conflicts == 1 and stage.stats.embedded == 0
    # The update's own event re-embeds the new content.
    assert await stage_on(graph, PlaceholderEmbedder(384)).embed_ids(TENANT, [memory_id]) == [memory_id]
    [expected] = await PlaceholderEmbedder(384).embed(["Changed meanwhile to Terraform"])
    assert (await graph.reader.get_memory(TENANT, memory_id)).embedding == pytest.approx(expected)


async def test_the_embedding_write_compares_version_and_content(graph):
    ids = await store_memories(graph, 3)
    read = await graph.reader.get_memories(TENANT, ids)
    now = datetime.now(UTC)
    # One is re-worded, one gets a new importance, between the read and the write.
    for memory_id, change in ((ids[0], {"content": "re-worded"}), (ids[1], {"importance": 0.9})):
        current = read[memory_id]
        changed = replace(current, **change, version=current.version + 1)
        event = MemoryEvent.for_memory(EventKind.UPDATED, changed, now, content_changed="content" in change)
        assert await graph.writer.update_memory(changed, current.version, event, now_us=1)
    vector = [1.0] + [0.0] * 383
    items = [(read[i], vector, "placeholder") for i in ids]
    events = [MemoryEvent.for_memory(EventKind.EMBEDDED, read[i], now) for i in ids]
    assert await graph.enrichment.record_embeddings(TENANT, items, events, now_us=to_micros(now)) == [ids[2]]
    after = await graph.reader.get_memories(TENANT, ids)
    assert after[ids[0]].embedding is None and after[ids[1]].embedding is None
    assert after[ids[2]].embedding == vector and after[ids[2]].version == read[ids[2]].version + 1
    assert await graph.enrichment.embedding_models(TENANT, ids) == {ids[2]: "placeholder"}
    # The stage re-reads a memory whose content is unchanged and writes its vector after all.
    stage = stage_on(graph, PlaceholderEmbedder(384))
    assert await stage.embed_ids(TENANT, ids[:2]) == ids[:2]
    assert stage.stats.embedded == 2 and stage.stats.conflicts == 0
    # A memory that has its vector gets its event without a write.
    assert await stage.embed_ids(TENANT, [ids[2]]) == [ids[2]]
    assert stage.stats.passed == 1
    assert (await graph.reader.get_memory(TENANT, ids[2])).version == read[ids[2]].version + 1
    assert await graph.enrichment.count_unembedded(TENANT) == 0


async def test_the_reconciler_embeds_and_enriches_what_no_event_reached(falkordb_server, nats_server, tmp_path):
    settings = enrich_settings(falkordb_server.port, nats_server.port, tmp_path / "data")
    stack = EnrichStack(settings)
    try:
        await stack.start("recall")
        at = datetime.now(UTC) - timedelta(minutes=5)
        memories = [
            memory_at(
                f"left{i}",
                at,
                tenant=TENANT,
                content=f"Left behind {i}: a note about Ansible",
                confidence=0.8,
                # The second was embedded and never enriched.
                embedding=(await PlaceholderEmbedder(384).embed(["Left behind 1: a note about Ansible"]))[0]
                if i == 1
                else None,
            )
            for i in range(2)
        ]
        events = [MemoryEvent.for_memory(EventKind.CREATED, m, at) for m in memories]
        await stack.store.writer.create_memories(memories, events, now_us=to_micros(at))
        await stack.store.outbox.delete_outbox([e.event_id for e in events])  # no event will ever be published
        await start_enrich(stack)
        found = await stack.wait_enriched(["left0", "left1"], within=20)
        assert all("entity:tools:ansible" in m.tags and m.embedding is not None for m in found.values())
        status = await enrichment_status(stack)
        assert status["embedding"]["reconciled"] == 1 and status["embedding"]["pending"] == 0
        assert status["pending"] == 0
    finally:
        await stack.close()


async def test_a_durable_from_an_older_release_is_moved_to_the_embedded_events(settings):
    """Before the embedding stage, enrich's durable listened to created and
    updated events; started now, it listens to embedded events only."""
    from services.core.adapters.nats_consumer import JetStreamConsumer
    from services.core.replica import stream_durables
    from services.core.wiring import consumer_spec, event_bus

    bus = event_bus(settings.bus, settings.process, durables=stream_durables(settings))
    await bus.connect()
    prefix = settings.bus.nats_subject_prefix
    seen: list[list] = []

    async def handler(deliveries):
        seen.append(deliveries)
        return [Outcome.DONE for _ in deliveries]

    old = [f"{prefix}.*.created", f"{prefix}.*.updated"]
    try:
        for subjects in (old, [f"{prefix}.*.embedded"]):
            consumer = JetStreamConsumer(
                bus,
                settings.bus.nats_stream,
                consumer_spec(settings.consumers, settings.bus, settings.consumers.enrich_durable, subjects, 8),
                handler,
            )
            await consumer.start()
            await consumer.stop()
        info = await bus.jetstream.consumer_info(settings.bus.nats_stream, settings.consumers.enrich_durable)
        assert (info.config.filter_subjects or [info.config.filter_subject]) == [f"{prefix}.*.embedded"]
    finally:
        await bus.close()


async def test_a_durable_made_beside_an_older_releases_starts_with_new_messages(settings):
    """Upgrading: the embed durable made next to an existing enrich durable
    does not replay the stream's history; made first (a new deployment), it does."""
    from services.core.adapters.nats_consumer import JetStreamConsumer
    from services.core.replica import stream_durables
    from services.core.wiring import consumer_spec, event_bus

    bus = event_bus(settings.bus, settings.process, durables=stream_durables(settings))
    await bus.connect()
    prefix = settings.bus.nats_subject_prefix
    seen: dict[str, list[str]] = {"fresh": [], "beside": []}

    def collect(name):
        async def handler(deliveries):
            seen[name] += [d.event.memory_id for d in deliveries]
            return [Outcome.DONE for _ in deliveries]

        return handler

    def memory(memory_id: str) -> Memory:
        return memory_at(memory_id, datetime.now(UTC), tenant=TENANT)

    async def consume(name: str, durable: str, fresh_start_if: str | None) -> JetStreamConsumer:
        spec = consumer_spec(
            settings.consumers, settings.bus, durable, [f"{prefix}.*.created"], 8, fresh_start_if=fresh_start_if
        )
        consumer = JetStreamConsumer(bus, settings.bus.nats_stream, spec, collect(name))
        await consumer.start()
        return consumer

    try:
        await bus.publish(MemoryEvent.for_memory(EventKind.CREATED, memory("history"), datetime.now(UTC)))
        first = await consume("fresh", "fresh-embed", fresh_start_if="no-such-durable")
        await bus.jetstream.add_consumer(settings.bus.nats_stream, durable_name="old-enrich")
        beside = await consume("beside", "beside-embed", fresh_start_if="old-enrich")
        await bus.publish(MemoryEvent.for_memory(EventKind.CREATED, memory("later"), datetime.now(UTC)))

        async def both_done() -> bool:
            return seen["fresh"] == ["history", "later"] and seen["beside"] == ["later"]

        await wait_for(both_done)
        for consumer in (first, beside):
            await consumer.stop()
    finally:
        await bus.close()


async def test_the_local_model_in_parallel_parts_gives_the_same_vectors_in_order():
    from services.core.adapters.embedders import LocalMiniLMEmbedder

    texts = [f"Note {i}: {'the deploy uses Docker ' * (i % 7)}and Terraform" for i in range(70)]
    one = await LocalMiniLMEmbedder(batch_size=8, intra_op_threads=1).embed(texts)
    two = await LocalMiniLMEmbedder(batch_size=8, intra_op_threads=1, parallel=2).embed(texts)
    assert len(two) == len(texts)
    for a, b in zip(one, two, strict=True):
        assert b == pytest.approx(a, abs=1e-5)
