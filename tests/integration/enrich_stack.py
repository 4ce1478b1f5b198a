"""Ingest, recall and enrich in-process on free ports, for enrichment tests."""

from __future__ import annotations

import asyncio
import time

import grpc

from memgrid.v1 import (
    ingest_service_pb2,
    ingest_service_pb2_grpc,
    memory_pb2,
    recall_service_pb2,
    recall_service_pb2_grpc,
)
from services.core.grpc.server import start
from services.core.wiring import graph_store
from services.enrich.bootstrap import build_app as build_enrich
from services.ingest.bootstrap import build_app as build_ingest
from services.recall.bootstrap import build_app as build_recall
from tests.conftest import plane_of, signed


class EnrichStack:
    def __init__(self, settings):
        self.settings = settings
        self.services = {}
        self.channel = None
        self.store = graph_store(settings.graph, settings.process, recall=settings.recall, backup=settings.backup)

    async def start(self, *names: str) -> None:
        builders = {"recall": build_recall, "ingest": build_ingest, "enrich": build_enrich}
        for name in names or ("recall", "ingest", "enrich"):
            service = await start(
                name,
                builders[name](self.settings),
                host="127.0.0.1",
                port=0,
                grace_seconds=1.0,
                plane=plane_of(self.settings),
            )
            self.services[name] = service
            if name == "recall":
                # enrich finds neighbours through recall: point it at the port recall got.
                self.settings = self.settings.override({"recall_grpc_port": service.port})
        if "ingest" in self.services and self.channel is None:
            self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{self.services['ingest'].port}")

    async def stop(self, *names: str) -> None:
        for name in names or list(self.services):
            service = self.services.pop(name, None)
            if service is not None:
                await service.stop()

    async def close(self) -> None:
        if self.channel is not None:
            await self.channel.close()
        await self.stop()
        await self.store.lifecycle.close()

    async def create(self, content: str, tenant: str = "acme", **fields) -> str:
        stub = ingest_service_pb2_grpc.IngestServiceStub(self.channel)
        request = ingest_service_pb2.CreateMemoryRequest(memory=memory_pb2.MemoryDraft(content=content, **fields))
        return (await stub.CreateMemory(request, metadata=signed(tenant))).memory.id

    async def wait_enriched(self, ids: list[str], tenant: str = "acme", within: float = 30.0) -> dict:
        deadline = time.monotonic() + within
        while True:
            found = await self.store.reader.get_memories(tenant, ids)
            if len(found) == len(ids) and all(m.enriched_at is not None for m in found.values()):
                return found
            if time.monotonic() > deadline:
                missing = [i for i in ids if i not in found or found[i].enriched_at is None]
                raise AssertionError(f"{len(missing)} of {len(ids)} memories not enriched after {within}s")
            await asyncio.sleep(0.1)

    async def wait_searchable(self, memory_id: str, tenant: str = "acme", within: float = 30.0) -> None:
        """Until recall's vector index holds the memory's point."""
        memory = (await self.wait_enriched([memory_id], tenant, within))[memory_id]
        deadline = time.monotonic() + within
        request = recall_service_pb2.SearchMemoriesRequest(embedding=memory.embedding, limit=1)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{self.services['recall'].port}") as channel:
            recall = recall_service_pb2_grpc.RecallServiceStub(channel)
            while time.monotonic() < deadline:
                reply = await recall.SearchMemories(request, metadata=signed(tenant))
                if reply.results and reply.results[0].memory.id == memory_id:
                    return
                await asyncio.sleep(0.05)
        raise AssertionError(f"memory {memory_id} not searchable after {within}s")

    async def edges(self, rel_type: str) -> list[tuple[str, str]]:
        rows = await self.store.connection.query(f"MATCH (a:Memory)-[:{rel_type}]->(b) RETURN a.id, b.id")
        return [(a, b) for a, b in rows.result_set]
