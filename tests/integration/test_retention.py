"""Bounded retention that loses nothing (docs/operations.md, Retention).

The stream an older release made without limits gets the settings' at
start-up, its events kept. A durable consumer that is stopped while the
stream's retention passes its position is reported behind (recall's
GetSystemStatus, which /health shows, and the consumer's metrics), and once
restarted repairs from the graph what the lost events would have done: the
memories written while enrich was stopped are embedded and enriched, those
written while recall was stopped are searchable. The periodic reconciler and
the index's count check are off here, so only the repair after the gap can
bring them."""

from __future__ import annotations

import json

import grpc
import pytest
from google.protobuf import struct_pb2
from nats.js.api import StorageType, StreamConfig
from prometheus_client import REGISTRY

from memgrid.v1 import recall_service_pb2, recall_service_pb2_grpc
from services.core.adapters.embedders import PlaceholderEmbedder
from services.core.adapters.nats_bus import LIMITS_KEY
from services.core.adapters.nats_retention import consumers_lag, read_gap
from services.core.replica import projector_durable, stream_durables
from services.core.wiring import event_bus
from tests.conftest import make_settings, signed
from tests.integration.enrich_stack import EnrichStack
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

#: Retention short enough for a test to outlast it (the duplicate window follows it down).
MAX_AGE = 2.0


def retention_settings(falkordb_server, nats_server, tmp_path, **overrides):
    values = dict(
        nats_stream_max_age_seconds=MAX_AGE,
        enrichment_reconcile_seconds=0,  # off: only the repair after a gap re-drives
        recall_index_check_seconds=0,  # off: only the repair after a gap re-projects
        outbox_sweep_seconds=0.3,
        outbox_grace_seconds=0.0,
        enrichment_backoff_seconds=[0.2, 0.2, 0.2],
    )
    values.update(overrides)
    return make_settings(falkordb_server.port, nats_server.port, tmp_path / "data", **values)


def metric(name: str, consumer: str) -> float:
    return REGISTRY.get_sample_value(name, {"consumer": consumer}) or 0.0


async def nats_figures(stack: EnrichStack) -> tuple[dict[str, float], str]:
    """The nats component of recall's GetSystemStatus (what /health shows): figures, detail."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{stack.services['recall'].port}") as channel:
        status = await recall_service_pb2_grpc.RecallServiceStub(channel).GetSystemStatus(
            recall_service_pb2.GetSystemStatusRequest(), metadata=signed(None, "operator")
        )
    [nats] = [c for c in status.components if c.name == "nats"]
    return dict(nats.figures), nats.detail


async def reported_caught_up(stack: EnrichStack) -> bool:
    """Whether /health's nats figures show no consumer behind the stream's retention."""
    figures, _ = await nats_figures(stack)
    return figures["consumers_behind"] == 0


async def passed_by_retention(bus, stream: str, durable: str, count: int) -> bool:
    """Whether the stream's first event is `count` or more past the durable's next one (the rule /health applies)."""
    figures, behind = await consumers_lag(bus.jetstream, stream, (durable,))
    return durable in behind and figures["events_lost"] >= count


async def gap_of(bus, stream: str, durable: str) -> dict | None:
    return read_gap((await bus.jetstream.consumer_info(stream, durable)).config.metadata)


async def test_a_stream_an_older_release_made_gets_the_limits_and_keeps_its_events(settings):
    settings = settings.override({"nats_stream_max_age_seconds": 3600.0, "nats_stream_max_bytes": 1 << 24})
    unlimited = settings.override({"nats_stream_max_age_seconds": 0.0, "nats_stream_max_bytes": 0})
    old = event_bus(unlimited.bus, unlimited.process)
    await old.connect()
    try:
        # As an older release made it: no limits, no record of memgrid's, a 2-minute duplicate window.
        await old.jetstream.delete_stream(settings.bus.nats_stream)
        await old.jetstream.add_stream(
            StreamConfig(
                name=settings.bus.nats_stream,
                subjects=[old.subjects],
                storage=StorageType.FILE,
                duplicate_window=120.0,
            )
        )
        for n in range(3):
            await old.jetstream.publish(f"{settings.bus.nats_subject_prefix}.acme.created", f"event {n}".encode())
    finally:
        await old.close()
    bus = event_bus(settings.bus, settings.process, durables=stream_durables(settings))
    await bus.connect()
    try:
        info = await bus.jetstream.stream_info(settings.bus.nats_stream)
        assert (info.config.max_age, info.config.max_bytes) == (3600.0, 1 << 24)
        assert bus.effective_limits == (3600.0, float(1 << 24))
        assert json.loads(info.config.metadata[LIMITS_KEY]) == [3600.0, 1 << 24]
        assert info.state.messages == 3  # updated in place: nothing lost
    finally:
        await bus.close()
    # Limits memgrid set follow the settings at the next start.
    longer = settings.override({"nats_stream_max_age_seconds": 7200.0})
    again = event_bus(longer.bus, longer.process)
    await again.connect()
    try:
        info = await again.jetstream.stream_info(settings.bus.nats_stream)
        assert info.config.max_age == 7200.0 and info.state.messages == 3
    finally:
        await again.close()


async def test_enrichment_lost_to_retention_is_reported_and_repaired_from_the_graph(
    falkordb_server, nats_server, tmp_path
):
    settings = retention_settings(falkordb_server, nats_server, tmp_path)
    durable = settings.consumers.embed_durable
    gaps, lost = metric("memgrid_consumer_gaps_total", durable), metric("memgrid_consumer_events_lost_total", durable)
    stack = EnrichStack(settings)
    bus = event_bus(settings.bus, settings.process, durables=stream_durables(settings))
    try:
        await stack.start()
        await bus.connect()
        first = await stack.create("Alice moved the build to Rust in March")
        await stack.wait_enriched([first])
        await stack.stop("enrich")
        ids = [await stack.create(f"Memory {n} written while enrich was stopped, about Berlin") for n in range(3)]
        await wait_for(lambda: passed_by_retention(bus, settings.bus.nats_stream, durable, len(ids)), within=20)

        # Reported while enrich is still stopped: the figures /health shows.
        figures, detail = await nats_figures(stack)
        assert figures["consumers_behind"] >= 1 and figures["events_lost"] >= len(ids)
        assert durable in detail
        assert all(m.enriched_at is None for m in (await stack.store.reader.get_memories("acme", ids)).values())

        await stack.start("enrich")
        found = await stack.wait_enriched(ids, within=30)
        assert all(m.embedding is not None for m in found.values())

        # Counted in the consumer's metrics, and recorded with the consumer, repaired.
        assert metric("memgrid_consumer_gaps_total", durable) >= gaps + 1
        assert metric("memgrid_consumer_events_lost_total", durable) >= lost + len(ids)
        record = await wait_for(lambda: _repaired(bus, settings.bus.nats_stream, durable))
        assert record["lost"] >= len(ids)
        assert metric("memgrid_consumer_behind", durable) == 0.0

        await wait_for(lambda: reported_caught_up(stack))
    finally:
        await bus.close()
        await stack.close()


async def _repaired(bus, stream: str, durable: str) -> dict | None:
    record = await gap_of(bus, stream, durable)
    return record if record and record.get("repaired_at") else None


def embedding_of(vector: list[float]) -> struct_pb2.Value:
    return struct_pb2.Value(list_value=struct_pb2.ListValue(values=[struct_pb2.Value(number_value=v) for v in vector]))


async def searchable(stack: EnrichStack, vector: list[float], memory_id: str) -> bool:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{stack.services['recall'].port}") as channel:
        reply = await recall_service_pb2_grpc.RecallServiceStub(channel).SearchMemories(
            recall_service_pb2.SearchMemoriesRequest(embedding=vector, limit=1), metadata=signed("acme")
        )
    return bool(reply.results) and reply.results[0].memory.id == memory_id


async def test_projection_lost_to_retention_is_repaired_from_the_graph(falkordb_server, nats_server, tmp_path):
    settings = retention_settings(falkordb_server, nats_server, tmp_path)
    durable = projector_durable(settings)
    gaps = metric("memgrid_consumer_gaps_total", durable)
    stack = EnrichStack(settings)
    bus = event_bus(settings.bus, settings.process, durables=stream_durables(settings))
    texts = ["kept while recall ran", *(f"written while recall was stopped {n}" for n in range(3))]
    vectors = await PlaceholderEmbedder(settings.vectors.vector_size).embed(texts)
    try:
        await stack.start("recall", "ingest")  # client-supplied vectors: the projector alone puts them in the index
        await bus.connect()
        first = await stack.create(texts[0], embedding=embedding_of(vectors[0]))
        await wait_for(lambda: searchable(stack, vectors[0], first))
        await stack.stop("recall")
        ids = [await stack.create(t, embedding=embedding_of(v)) for t, v in zip(texts[1:], vectors[1:], strict=True)]
        await wait_for(lambda: passed_by_retention(bus, settings.bus.nats_stream, durable, len(ids)), within=20)

        await stack.start("recall")
        for memory_id, vector in zip(ids, vectors[1:], strict=True):
            await wait_for(lambda m=memory_id, v=vector: searchable(stack, v, m), within=30)
        assert metric("memgrid_consumer_gaps_total", durable) >= gaps + 1
        await wait_for(lambda: _repaired(bus, settings.bus.nats_stream, durable))
        # /health stops reporting it once the projector's next fetch has moved it past the gap.
        await wait_for(lambda: reported_caught_up(stack))
    finally:
        await bus.close()
        await stack.close()
