"""Recall's readiness: a replica that starts while the shared projection
consumer has a backlog answers NOT_SERVING for its service name (what the
readiness probe asks) and SERVING once the backlog drained; the overall
status (what liveness asks) serves from the start."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memgrid.v1 import audit_service_pb2, recall_service_pb2
from services.core.domain.delivery import Outcome
from services.core.domain.event_consumers import PROJECTION
from services.core.domain.model import EventKind, MemoryEvent
from services.core.grpc.app import full_service_name
from services.core.grpc.server import start
from services.core.replica import projector_durable, projector_inactive_seconds, stream_durables
from services.core.wiring import event_bus, event_consumer, subscription_spec
from services.recall.bootstrap import build_app
from tests.conftest import make_settings, plane_of

pytestmark = pytest.mark.integration

RECALL = full_service_name(recall_service_pb2, "RecallService")
T0 = datetime(2025, 3, 1, tzinfo=UTC)


async def status(port: int, service: str) -> str:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=service), timeout=5
        )
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


async def eventually(port: int, service: str, wanted: str, seconds: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while (seen := await status(port, service)) != wanted:
        assert asyncio.get_running_loop().time() < deadline, f"{service or '(overall)'} still {seen}"
        await asyncio.sleep(0.1)


async def test_a_recall_started_with_a_backlog_serves_once_the_shared_projection_drained(
    falkordb_server, nats_server, tmp_path
):
    settings = make_settings(
        falkordb_server.port,
        nats_server.port,
        tmp_path / "data",
        recall_ready_max_pending=0,
        recall_ready_timeout_seconds=120,
        recall_ready_poll_seconds=0.1,
        # The other replica runs in this process, so recall's start-up (loading the embedder) stalls its
        # in-progress heartbeats; with JetStream's ack wait at the first backoff (1 s by default) the 10 it
        # holds were redelivered to recall under load. A separate replica's heartbeats would not stall.
        enrichment_backoff_seconds=[10.0, 10.0, 15.0],
    )
    bus = event_bus(settings.bus, settings.process, durables=stream_durables(settings))
    await bus.connect()
    events = [
        MemoryEvent(f"ev-{i}", "default", EventKind.CREATED, str(uuid.uuid4()), 1, T0, has_embedding=True)
        for i in range(40)
    ]
    assert all(await bus.publish_many(events))

    # Another consumer of recall's durable (replicas sharing a Qdrant server share it) takes the first 10
    # and holds them (in progress).
    held, release = asyncio.Event(), asyncio.Event()
    seen_by_other: list[str] = []

    async def hold(deliveries):
        seen_by_other.extend(d.event.event_id for d in deliveries)
        held.set()
        await release.wait()
        return [Outcome.DONE] * len(deliveries)

    durable = projector_durable(settings)
    spec = subscription_spec(
        settings.consumers,
        settings.bus,
        durable,
        PROJECTION,
        10,
        inactive_seconds=projector_inactive_seconds(settings),
    )
    other = event_consumer(settings.bus, bus, spec, hold)
    await other.start()
    await asyncio.wait_for(held.wait(), timeout=10)

    running = await start(
        "recall", build_app(settings), host="127.0.0.1", port=0, grace_seconds=1.0, plane=plane_of(settings)
    )
    try:
        # Started: alive (the overall status), the audit service serves, but reads wait for the backlog.
        assert await status(running.port, "") == "SERVING"
        assert await status(running.port, full_service_name(audit_service_pb2, "AuditService")) == "SERVING"
        # The 30 the other replica did not take are this one's to project; the 10 it holds keep the backlog
        # above RECALL_READY_MAX_PENDING (0), so recall stays out of the readiness set.
        await asyncio.sleep(1.5)
        assert await status(running.port, RECALL) == "NOT_SERVING"
        info = await bus.jetstream.consumer_info(settings.bus.nats_stream, durable)
        assert (info.num_pending, info.num_ack_pending) == (0, 10)
        assert len(seen_by_other) == 10  # one durable, shared: each event went to one replica

        release.set()  # the other replica acknowledges what it held: the backlog is drained
        await eventually(running.port, RECALL, "SERVING")
        info = await bus.jetstream.consumer_info(settings.bus.nats_stream, durable)
        assert info.num_pending + info.num_ack_pending == 0
        assert len(seen_by_other) == 10  # the other replica saw none of recall's 30
    finally:
        release.set()
        await running.stop()
        await other.stop()
        await bus.close()


async def test_a_recall_whose_backlog_does_not_drain_serves_after_the_ready_timeout(
    falkordb_server, nats_server, tmp_path
):
    settings = make_settings(
        falkordb_server.port,
        nats_server.port,
        tmp_path / "data",
        recall_ready_max_pending=0,
        # Long enough that a start on a loaded machine does not outlast it before the first look.
        recall_ready_timeout_seconds=6.0,
        recall_ready_poll_seconds=0.1,
    )
    bus = event_bus(settings.bus, settings.process, durables=stream_durables(settings))
    await bus.connect()
    event = MemoryEvent("ev-stuck", "default", EventKind.CREATED, str(uuid.uuid4()), 1, T0, has_embedding=True)
    assert all(await bus.publish_many([event]))
    held, release = asyncio.Event(), asyncio.Event()

    async def hold(deliveries):
        held.set()
        await release.wait()
        return [Outcome.DONE] * len(deliveries)

    durable = projector_durable(settings)
    spec = subscription_spec(
        settings.consumers,
        settings.bus,
        durable,
        PROJECTION,
        10,
        inactive_seconds=projector_inactive_seconds(settings),
    )
    other = event_consumer(settings.bus, bus, spec, hold)
    await other.start()
    await asyncio.wait_for(held.wait(), timeout=10)
    running = await start(
        "recall", build_app(settings), host="127.0.0.1", port=0, grace_seconds=1.0, plane=plane_of(settings)
    )
    try:
        assert await status(running.port, RECALL) == "NOT_SERVING"
        # Availability over freshness: once RECALL_READY_TIMEOUT_SECONDS passed it serves, backlog or not.
        await eventually(running.port, RECALL, "SERVING", seconds=20)
        info = await bus.jetstream.consumer_info(settings.bus.nats_stream, durable)
        assert info.num_ack_pending == 1
    finally:
        release.set()
        await running.stop()
        await other.stop()
        await bus.close()
