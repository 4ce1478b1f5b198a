"""Two recall replicas with the embedded index, on one stream and one graph:
each reads every event through a durable of its own, so each index holds
every memory (one shared durable would split the events between them), and
each durable lapses once nobody reads it (RECALL_PROJECTOR_INACTIVE_SECONDS)."""

from __future__ import annotations

import grpc
import pytest

from memgrid.v1 import recall_service_pb2, recall_service_pb2_grpc
from services.core.adapters.embedders import PlaceholderEmbedder
from services.core.grpc.server import start
from services.core.replica import projector_durable, stream_durables
from services.core.wiring import event_bus
from services.ingest.bootstrap import build_app as build_ingest
from services.recall.bootstrap import build_app as build_recall
from tests.conftest import make_settings, plane_of, signed
from tests.integration.enrich_stack import EnrichStack
from tests.integration.test_retention import embedding_of
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


async def found_by(port: int, vector: list[float], memory_id: str) -> bool:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        reply = await recall_service_pb2_grpc.RecallServiceStub(channel).SearchMemories(
            recall_service_pb2.SearchMemoriesRequest(embedding=vector, limit=1), metadata=signed("acme")
        )
    return bool(reply.results) and reply.results[0].memory.id == memory_id


async def test_each_recall_replica_indexes_every_memory(falkordb_server, nats_server, tmp_path):
    base = make_settings(falkordb_server.port, nats_server.port, tmp_path / "a", recall_projector_inactive_seconds=3600)
    replicas = [base, base.override({"memgrid_data_dir": tmp_path / "b"})]
    durables = [projector_durable(s) for s in replicas]
    assert durables[0] != durables[1]
    stack = EnrichStack(base)
    running = []
    bus = event_bus(base.bus, base.process, durables=stream_durables(base))
    try:
        for settings in replicas:
            running.append(
                await start(
                    "recall", build_recall(settings), host="127.0.0.1", port=0, grace_seconds=1.0, plane=plane_of(base)
                )
            )
        stack.services["ingest"] = await start(
            "ingest", build_ingest(base), host="127.0.0.1", port=0, grace_seconds=1.0, plane=plane_of(base)
        )
        stack.channel = grpc.aio.insecure_channel(f"127.0.0.1:{stack.services['ingest'].port}")
        texts = [f"replicated memory {n}" for n in range(12)]
        vectors = await PlaceholderEmbedder(base.vectors.vector_size).embed(texts)
        ids = [await stack.create(t, embedding=embedding_of(v)) for t, v in zip(texts, vectors, strict=True)]
        for replica in running:
            for memory_id, vector in zip(ids, vectors, strict=True):
                await wait_for(lambda p=replica.port, v=vector, m=memory_id: found_by(p, v, m), within=30)
        await bus.connect()
        for durable in durables:
            info = await bus.jetstream.consumer_info(base.bus.nats_stream, durable)
            assert info.delivered.stream_seq >= len(ids)  # every event, not a share of them
            assert info.config.inactive_threshold == 3600
    finally:
        await bus.close()
        for replica in running:
            await replica.stop()
        await stack.close()
