"""Enrichment end to end over real NATS and FalkorDB: ingest publishes,
enrich consumes and writes, recall projects; placeholder embeddings and the
rule-based entity ruler keep it fast (the real models have their own tests)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from devstack.servers import free_port, start_nats
from services.core.domain.model import EventKind, MemoryEvent
from tests.conftest import make_settings, plane_of, signed
from tests.integration.enrich_stack import EnrichStack

pytestmark = pytest.mark.integration


def enrich_settings(falkordb_port: int, nats_port: int, data_dir, **overrides):
    values = dict(
        enrichment_similarity_threshold=0.6,
        enrichment_pattern_min_members=3,
        enrichment_reconcile_seconds=0.5,
        enrichment_reconcile_grace_seconds=0.5,
        outbox_sweep_seconds=0.3,
        outbox_grace_seconds=0.0,
        enrichment_backoff_seconds=[0.2, 0.2, 0.2],
    )
    values.update(overrides)
    return make_settings(falkordb_port, nats_port, data_dir, **values)


@pytest.fixture
async def stack(falkordb_server, nats_server, tmp_path):
    # These tests follow the event path; the reconciler (tested on its own below)
    # would race it on a loaded machine and enrich a memory a second time.
    settings = enrich_settings(
        falkordb_server.port, nats_server.port, tmp_path / "data", enrichment_reconcile_grace_seconds=60
    )
    stack = EnrichStack(settings)
    await stack.start()
    yield stack
    await stack.close()


async def test_a_new_memory_is_embedded_summarised_tagged_and_assessed(stack):
    memory_id = await stack.create(
        "We chose PostgreSQL over MongoDB for the billing service. It needs ACID transactions.",
        type="Decision",
        tags=None,
        metadata_json='{"source": "slack"}',
    )
    memory = (await stack.wait_enriched([memory_id]))[memory_id]
    assert memory.embedding is not None and len(memory.embedding) == 384
    assert memory.summary == "We chose PostgreSQL over MongoDB for the billing service."
    entities = memory.metadata["entities"]
    assert {"PostgreSQL", "MongoDB"} <= set(entities["tools"])
    assert {"entity:tools:postgresql", "entity:tools:mongodb"} <= set(memory.tags)
    assert memory.factuality["label"] in ("FACT", "UNVERIFIED", "FICTION")
    enrichment = memory.metadata["enrichment"]
    assert enrichment["forced"] is False and enrichment["embedding_model"] == "placeholder"
    # The client's metadata is kept, and holds nothing enrichment derived but the keys reserved for it.
    assert memory.metadata.keys() == {"source", "entities", "enrichment"} and memory.metadata["source"] == "slack"
    assert memory.version == 3  # the embedding stage, then enrichment


async def test_links_preceded_by_similar_to_and_patterns(stack):
    ids = []
    for i in range(4):
        ids.append(
            await stack.create(f"Decided to use PostgreSQL for the reporting store, iteration {i}", type="Decision")
        )
        await stack.wait_enriched(ids)
        await asyncio.sleep(0.3)  # let recall project the vector before the next one looks for neighbours
    memories = await stack.wait_enriched(ids)
    preceded = set(await stack.edges("PRECEDED_BY"))
    assert (ids[1], ids[0]) in preceded and (ids[3], ids[2]) in preceded
    similar = set(await stack.edges("SIMILAR_TO"))
    assert (ids[3], ids[2]) in similar or (ids[3], ids[1]) in similar
    exemplifies = await stack.edges("EXEMPLIFIES")
    assert {a for a, _ in exemplifies} >= set(ids[:3])
    assert memories[ids[3]].metadata["enrichment"]["patterns_detected"] >= 1
    assert memories[ids[3]].metadata["enrichment"]["semantic_neighbors"] >= 1
    assert memories[ids[1]].metadata["enrichment"]["temporal_links"] >= 1


async def test_an_enriched_memory_is_searchable_by_vector(stack):
    from memgrid.v1 import recall_service_pb2, recall_service_pb2_grpc
    from services.core.adapters.embedders import PlaceholderEmbedder

    memory_id = await stack.create("The staging cluster runs on Kubernetes", type="Context")
    await stack.wait_enriched([memory_id])
    [vector] = await PlaceholderEmbedder(384).embed(["The staging cluster runs on Kubernetes"])
    import grpc

    async with grpc.aio.insecure_channel(f"127.0.0.1:{stack.services['recall'].port}") as channel:
        recall = recall_service_pb2_grpc.RecallServiceStub(channel)
        for _ in range(50):
            reply = await recall.SearchMemories(
                recall_service_pb2.SearchMemoriesRequest(embedding=vector, limit=3), metadata=signed("acme")
            )
            if reply.results:
                break
            await asyncio.sleep(0.1)
        assert reply.results[0].memory.id == memory_id and reply.results[0].match_score > 0.99
        other = await recall.SearchMemories(
            recall_service_pb2.SearchMemoriesRequest(embedding=vector, limit=3), metadata=signed("other")
        )
        assert list(other.results) == []


async def test_enrichment_never_overwrites_a_concurrent_update(stack):
    memory_id = await stack.create("Redis caches the session tokens", type="Context")
    enriched = (await stack.wait_enriched([memory_id]))[memory_id]
    # A PATCH lands after enrichment read version 2: enrichment's stale write must not apply.
    patched = replace(enriched, importance=0.99, version=enriched.version + 1)
    event = MemoryEvent.for_memory(EventKind.UPDATED, patched, datetime.now(UTC))
    assert await stack.store.writer.update_memory(patched, enriched.version, event, now_us=1)
    stale = replace(enriched, summary="stale", version=enriched.version + 1)
    written = await stack.store.enrichment.apply_enrichment(
        "acme",
        [(stale, enriched.version)],
        [MemoryEvent.for_memory(EventKind.ENRICHED, stale, datetime.now(UTC))],
        now_us=1,
    )
    assert written == []
    current = await stack.store.reader.get_memory("acme", memory_id)
    assert current.importance == 0.99 and current.summary != "stale"


async def test_a_content_change_re_embeds_and_re_enriches(stack):
    from memgrid.v1 import ingest_service_pb2, ingest_service_pb2_grpc, memory_pb2

    memory_id = await stack.create("We host everything on Docker", type="Context")
    first = (await stack.wait_enriched([memory_id]))[memory_id]
    stub = ingest_service_pb2_grpc.IngestServiceStub(stack.channel)
    request = ingest_service_pb2.UpdateMemoryRequest(
        id=memory_id, memory=memory_pb2.MemoryDraft(content="We moved everything to Kubernetes")
    )
    request.update_mask.paths.append("content")
    await stub.UpdateMemory(request, metadata=signed("acme"))
    for _ in range(100):
        current = await stack.store.reader.get_memory("acme", memory_id)
        if current.enriched_at and current.enriched_at > first.enriched_at:
            break
        await asyncio.sleep(0.1)
    assert current.summary == "We moved everything to Kubernetes"
    assert "entity:tools:kubernetes" in current.tags
    assert current.embedding != first.embedding
    # The old text's derived tag and entity link are replaced, not kept beside the new ones.
    assert "entity:tools:docker" in first.tags and "entity:tools:docker" not in current.tags
    mentions = await stack.store.connection.query(
        "MATCH (:Memory {id: $id})-[:MENTIONS]->(e:Entity) RETURN e.tag", {"id": memory_id}
    )
    assert [row[0] for row in mentions.result_set] == ["entity:tools:kubernetes"]


async def test_memories_stored_while_nats_is_down_are_enriched_once_it_returns(falkordb_server, tmp_path):
    nats_port = free_port()
    nats_dir = tmp_path / "nats"
    nats_server = start_nats(nats_port, nats_dir)
    stack = EnrichStack(enrich_settings(falkordb_server.port, nats_port, tmp_path / "data"))
    try:
        await stack.start()
        nats_server.stop()
        ids = [
            await stack.create(f"Stored during the outage, note {i} about Terraform", type="Context") for i in range(10)
        ]
        nats_server = start_nats(nats_port, nats_dir)
        memories = await stack.wait_enriched(ids, within=40)
        assert all(m.embedding is not None for m in memories.values())
        assert all("entity:tools:terraform" in m.tags for m in memories.values())
    finally:
        await stack.close()
        nats_server.stop()


class FailingEmbedder:
    dimension = 384
    name = "failing"

    def __init__(self):
        self.batches: list[list[str]] = []

    async def embed(self, texts):
        self.batches.append(list(texts))
        raise RuntimeError("embedding provider down")


async def test_a_failing_embedder_dead_letters_after_the_last_attempt(falkordb_server, nats_server, tmp_path):
    from services.enrich.bootstrap import build_app as build_enrich

    settings = enrich_settings(
        falkordb_server.port, nats_server.port, tmp_path / "data", enrichment_reconcile_seconds=3600
    )
    stack = EnrichStack(settings)
    embedder = FailingEmbedder()
    try:
        await stack.start("recall", "ingest")
        from services.core.grpc.server import start

        stack.services["enrich"] = await start(
            "enrich",
            build_enrich(stack.settings, embedder=embedder),
            host="127.0.0.1",
            port=0,
            grace_seconds=1.0,
            plane=plane_of(stack.settings),
        )
        memory_id = await stack.create("This one cannot be embedded", type="Context")
        from tests.integration.test_dead_letters import read_dead

        dead = []
        for _ in range(100):
            dead = await read_dead(settings, settings.consumers.embed_durable)
            if dead:
                break
            await asyncio.sleep(0.1)
        assert [e.memory_id for e in dead] == [memory_id]
        attempts = [b for b in embedder.batches if b == ["This one cannot be embedded"]]
        assert len(attempts) == settings.consumers.enrichment_max_attempts
        assert (await stack.store.reader.get_memory("acme", memory_id)).enriched_at is None
    finally:
        await stack.close()


async def test_the_reconciler_enriches_what_was_left_behind(falkordb_server, nats_server, tmp_path):
    """A memory whose event never reached enrich (enrich was off) is picked up."""
    settings = enrich_settings(falkordb_server.port, nats_server.port, tmp_path / "data")
    stack = EnrichStack(settings.override({"enrich_durable": "someone-else"}))
    try:
        await stack.start("recall", "ingest")
        memory_id = await stack.create("Left behind: a note about Ansible", type="Context")
        await asyncio.sleep(0.6)
        await stack.start("enrich")
        memory = (await stack.wait_enriched([memory_id], within=20))[memory_id]
        assert "entity:tools:ansible" in memory.tags
    finally:
        await stack.close()


async def test_past_window_memories_are_not_linked(stack):
    old = datetime.now(UTC) - timedelta(days=10)
    first = await stack.create("An old note about Grafana", type="Context", timestamp=old.isoformat())
    second = await stack.create("A new note about Grafana", type="Context")
    await stack.wait_enriched([first, second])
    assert (second, first) not in set(await stack.edges("PRECEDED_BY"))


async def test_a_client_supplied_embedding_is_searchable_without_enrichment(falkordb_server, nats_server, tmp_path):
    import grpc
    from google.protobuf import struct_pb2

    from memgrid.v1 import recall_service_pb2, recall_service_pb2_grpc
    from services.core.adapters.embedders import PlaceholderEmbedder

    stack = EnrichStack(enrich_settings(falkordb_server.port, nats_server.port, tmp_path / "data"))
    try:
        await stack.start("recall", "ingest")
        [vector] = await PlaceholderEmbedder(384).embed(["supplied by the client"])
        embedding = struct_pb2.Value(
            list_value=struct_pb2.ListValue(values=[struct_pb2.Value(number_value=v) for v in vector])
        )
        memory_id = await stack.create("supplied by the client", type="Context", embedding=embedding)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{stack.services['recall'].port}") as channel:
            recall = recall_service_pb2_grpc.RecallServiceStub(channel)
            request = recall_service_pb2.SearchMemoriesRequest(embedding=vector, limit=1)
            for _ in range(100):
                reply = await recall.SearchMemories(request, metadata=signed("acme"))
                if reply.results:
                    break
                await asyncio.sleep(0.05)
        assert reply.results[0].memory.id == memory_id
        assert (await stack.store.reader.get_memory("acme", memory_id)).enriched_at is None
    finally:
        await stack.close()
