"""The services in-process on free ports, against real FalkorDB and NATS."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import struct_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from prometheus_client import REGISTRY

from devstack.servers import free_port, start_nats
from memgrid.v1 import (
    consolidate_service_pb2,
    consolidate_service_pb2_grpc,
    events_pb2,
    ingest_service_pb2,
    ingest_service_pb2_grpc,
    memory_pb2,
    recall_service_pb2,
    recall_service_pb2_grpc,
)
from services.consolidate.bootstrap import build_app as build_consolidate
from services.core.grpc.errors import error_info
from services.core.grpc.server import start
from services.core.wiring import graph_store
from services.enrich.bootstrap import build_app as build_enrich
from services.ingest.bootstrap import build_app as build_ingest
from services.recall.bootstrap import build_app as build_recall
from tests.conftest import make_settings, plane_of, signed
from tests.fakes import outbox_size
from tests.integration.test_nats_bus import read_all
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

BUILDERS = {"ingest": build_ingest, "recall": build_recall, "enrich": build_enrich, "consolidate": build_consolidate}


@pytest.fixture
async def stack(settings):
    """All four services; yields {name: (RunningService, channel)}."""
    running = {}
    try:
        for name, build in BUILDERS.items():
            service = await start(
                name, build(settings), host="127.0.0.1", port=0, grace_seconds=1.0, plane=plane_of(settings)
            )
            running[name] = (service, grpc.aio.insecure_channel(f"127.0.0.1:{service.port}"))
        yield running
    finally:
        for service, channel in running.values():
            await channel.close()
            await service.stop()


def draft(**fields) -> memory_pb2.MemoryDraft:
    return memory_pb2.MemoryDraft(**fields)


async def test_every_service_answers_health_and_reflection(stack):
    for name, (service, channel) in stack.items():
        health = health_pb2_grpc.HealthStub(channel)
        overall = await health.Check(health_pb2.HealthCheckRequest(service=""))
        assert overall.status == health_pb2.HealthCheckResponse.SERVING, name
        named = await health.Check(health_pb2.HealthCheckRequest(service=service.app.service_names[0]))
        assert named.status == health_pb2.HealthCheckResponse.SERVING, name
        reflect = reflection_pb2_grpc.ServerReflectionStub(channel)
        replies = [
            r
            async for r in reflect.ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")])
            )
        ]
        listed = {s.name for s in replies[0].list_services_response.service}
        assert service.app.service_names[0] in listed
        assert "grpc.health.v1.Health" in listed


async def _outbox_empty(outbox) -> bool:
    return await outbox_size(outbox) == 0


async def test_create_writes_the_graph_and_publishes_an_event(stack, settings):
    ingest = ingest_service_pb2_grpc.IngestServiceStub(stack["ingest"][1])
    reply = await ingest.CreateMemory(
        ingest_service_pb2.CreateMemoryRequest(
            memory=draft(content="Decided to use FalkorDB", tags=struct_pb2.Value(string_value="db"))
        ),
        metadata=signed("acme"),
    )
    memory = reply.memory
    assert memory.tenant == "acme" and memory.type == "Decision" and memory.confidence == pytest.approx(0.6)
    assert list(memory.tags) == ["db"] and reply.enrichment == "queued"

    store = graph_store(settings.graph, settings.process, recall=settings.recall, backup=settings.backup)
    try:
        stored = await store.reader.get_memory("acme", memory.id)
        assert stored is not None and stored.content == "Decided to use FalkorDB"
        # The relay clears acknowledged events off the request path: soon after the reply, not before it
        # (0.1 s here when idle; a fixed 0.2 s wait failed under load).
        assert await wait_for(lambda: _outbox_empty(store.outbox), within=5.0)
    finally:
        await store.lifecycle.close()
    events = await read_all(settings, f"{settings.bus.nats_subject_prefix}.acme.created")
    assert [e.memory_id for e in events] == [memory.id]
    assert events[0].kind == events_pb2.MEMORY_EVENT_KIND_CREATED and events[0].version == 1

    recall = recall_service_pb2_grpc.RecallServiceStub(stack["recall"][1])
    got = await recall.GetMemory(recall_service_pb2.GetMemoryRequest(id=memory.id), metadata=signed("acme"))
    assert got.memory.content == memory.content and got.memory.id == memory.id
    with pytest.raises(grpc.aio.AioRpcError) as other_tenant:
        await recall.GetMemory(recall_service_pb2.GetMemoryRequest(id=memory.id), metadata=signed("other"))
    assert other_tenant.value.code() == grpc.StatusCode.NOT_FOUND
    every = signed(None, "operator")
    status = await recall.GetSystemStatus(recall_service_pb2.GetSystemStatusRequest(), metadata=every)
    assert status.memory_count == 1
    for tenant, count in (("acme", 1), ("other", 0)):  # with a tenant, its own count
        scoped = await recall.GetSystemStatus(recall_service_pb2.GetSystemStatusRequest(), metadata=signed(tenant))
        assert scoped.memory_count == count
    assert {c.name: c.status for c in status.components} == {
        "falkordb": "connected",
        "nats": "connected",
        "vector_index": "connected",
    }
    sample = REGISTRY.get_sample_value(
        "memgrid_grpc_requests_total", {"service": "ingest", "method": "CreateMemory", "code": "OK"}
    )
    assert sample is not None and sample >= 1


async def test_validation_errors_carry_reason_and_numbers(stack):
    ingest = ingest_service_pb2_grpc.IngestServiceStub(stack["ingest"][1])
    with pytest.raises(grpc.aio.AioRpcError) as too_long:
        await ingest.CreateMemory(
            ingest_service_pb2.CreateMemoryRequest(memory=draft(content="x" * 2001)), metadata=signed("acme")
        )
    assert too_long.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    info = error_info(too_long.value)
    assert info.reason == "CONTENT_TOO_LONG"
    assert dict(info.metadata) == {"field": "content", "length": "2001", "limit": "2000"}


async def test_calls_without_a_tenant_are_refused(stack):
    ingest = ingest_service_pb2_grpc.IngestServiceStub(stack["ingest"][1])
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await ingest.CreateMemory(ingest_service_pb2.CreateMemoryRequest(memory=draft(content="hi")))
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_consolidation_refuses_an_unknown_mode_naming_it(stack):
    consolidate = consolidate_service_pb2_grpc.ConsolidateServiceStub(stack["consolidate"][1])
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await consolidate.RunConsolidation(
            consolidate_service_pb2.RunConsolidationRequest(mode="nap"), metadata=signed("acme")
        )
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(refused.value).reason == "INVALID_MODE"
    assert dict(error_info(refused.value).metadata)["field"] == "mode"
    # dry_run unset: a dry run.
    reply = await consolidate.RunConsolidation(
        consolidate_service_pb2.RunConsolidationRequest(mode="decay"), metadata=signed("acme")
    )
    assert reply.dry_run is True


async def test_graceful_shutdown_reports_not_serving_first(settings):
    service = await start(
        "consolidate",
        build_consolidate(settings),
        host="127.0.0.1",
        port=0,
        grace_seconds=1.0,
        plane=plane_of(settings),
    )
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{service.port}")
    try:
        health = health_pb2_grpc.HealthStub(channel)
        await service.health.enter_graceful_shutdown()
        reply = await health.Check(health_pb2.HealthCheckRequest(service=""))
        assert reply.status == health_pb2.HealthCheckResponse.NOT_SERVING
    finally:
        await service.stop()
        await channel.close()
    probe = grpc.aio.insecure_channel(f"127.0.0.1:{service.port}")
    with pytest.raises(grpc.aio.AioRpcError):
        await health_pb2_grpc.HealthStub(probe).Check(health_pb2.HealthCheckRequest(), timeout=1)
    await probe.close()


async def test_a_write_is_kept_when_nats_is_down(falkordb_server, tmp_path):
    nats_dir = tmp_path / "nats"
    nats_server = start_nats(free_port(), nats_dir)
    settings = make_settings(falkordb_server.port, nats_server.port, tmp_path / "data")
    service = await start(
        "ingest", build_ingest(settings), host="127.0.0.1", port=0, grace_seconds=1.0, plane=plane_of(settings)
    )
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{service.port}")
    store = graph_store(settings.graph, settings.process, recall=settings.recall, backup=settings.backup)
    try:
        nats_server.stop()
        ingest = ingest_service_pb2_grpc.IngestServiceStub(channel)
        reply = await ingest.CreateMemory(
            ingest_service_pb2.CreateMemoryRequest(memory=draft(content="stored while NATS is down")),
            metadata=signed("acme"),
        )
        assert reply.enrichment == "pending"
        stored = await store.reader.get_memory("acme", reply.memory.id)
        assert stored is not None and stored.content == "stored while NATS is down"
        [entry] = await store.outbox.pending_outbox(older_than_us=2**62, limit=10)
        assert entry.event.memory_id == reply.memory.id and entry.event.kind.value == "created"
    finally:
        await store.lifecycle.close()
        await channel.close()
        await service.stop()
        nats_server.stop()
