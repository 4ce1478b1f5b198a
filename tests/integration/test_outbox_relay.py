"""Nothing acknowledged is lost: writes made while NATS is down reach the
stream once it is back, each exactly once."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from devstack.servers import free_port, start_nats
from memgrid.v1 import ingest_service_pb2, ingest_service_pb2_grpc, memory_pb2
from services.core.grpc.server import start
from services.core.wiring import graph_store
from services.ingest.bootstrap import build_app
from tests.conftest import make_settings, plane_of, signed
from tests.integration.test_nats_bus import read_all

pytestmark = pytest.mark.integration


async def test_writes_during_an_outage_are_published_once_nats_returns(falkordb_server, tmp_path):
    nats_dir = tmp_path / "nats"
    nats_port = free_port()
    nats_server = start_nats(nats_port, nats_dir)
    settings = make_settings(
        falkordb_server.port, nats_port, tmp_path / "data", outbox_sweep_seconds=0.2, outbox_grace_seconds=0.0
    )
    service = await start(
        "ingest", build_app(settings), host="127.0.0.1", port=0, grace_seconds=1.0, plane=plane_of(settings)
    )
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{service.port}")
    store = graph_store(settings.graph, settings.process, recall=settings.recall, backup=settings.backup)
    try:
        ingest = ingest_service_pb2_grpc.IngestServiceStub(channel)
        nats_server.stop()
        ids = []
        for i in range(5):
            reply = await ingest.CreateMemory(
                ingest_service_pb2.CreateMemoryRequest(memory=memory_pb2.MemoryDraft(content=f"during outage {i}")),
                metadata=signed("acme"),
            )
            assert reply.enrichment == "pending"
            ids.append(reply.memory.id)
        assert len(await store.outbox.pending_outbox(2**62, 100)) == 5

        nats_server = start_nats(nats_port, nats_dir)
        deadline = time.monotonic() + 20
        while await store.outbox.pending_outbox(2**62, 100):
            assert time.monotonic() < deadline, "the relay did not drain the outbox"
            await asyncio.sleep(0.2)
        await asyncio.sleep(0.5)  # let any duplicate publication land before counting
        events = await read_all(settings, f"{settings.bus.nats_subject_prefix}.acme.created")
        assert sorted(e.memory_id for e in events) == sorted(ids)
    finally:
        await store.lifecycle.close()
        await channel.close()
        await service.stop()
        nats_server.stop()
