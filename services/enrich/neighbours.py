"""Neighbours come from recall's vector arm, over gRPC (enrich never reads
the vector index itself: recall owns it)."""

from __future__ import annotations

import grpc
import structlog
from prometheus_client import Counter

from memgrid.v1 import recall_service_pb2, recall_service_pb2_grpc
from services.core.codec import memory_from_pb
from services.core.domain.model import Memory
from services.core.grpc.tenant import tenant_metadata

log = structlog.get_logger()
UNAVAILABLE = Counter("memgrid_enrichment_neighbour_failures_total", "Neighbour searches recall could not answer")


class RecallNeighbours:
    """NeighbourFinder over RecallService.SearchMemories."""

    def __init__(self, target: str, timeout_seconds: float):
        self._target = target
        self._timeout = timeout_seconds
        self._channel: grpc.aio.Channel | None = None
        self._stub = None

    async def neighbours(self, tenant: str, vector: list[float], *, limit: int, min_score: float):
        if self._stub is None:
            self._channel = grpc.aio.insecure_channel(self._target)
            self._stub = recall_service_pb2_grpc.RecallServiceStub(self._channel)
        request = recall_service_pb2.SearchMemoriesRequest(embedding=vector, limit=limit, min_score=min_score)
        try:
            reply = await self._stub.SearchMemories(request, metadata=tenant_metadata(tenant), timeout=self._timeout)
        except grpc.aio.AioRpcError as exc:
            # Without recall, enrichment goes on without SIMILAR_TO links rather than stalling.
            UNAVAILABLE.inc()
            log.warning("neighbour search failed", code=exc.code().name)
            return []
        found: list[tuple[Memory, float]] = [(memory_from_pb(r.memory), r.match_score) for r in reply.results]
        return found

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = self._stub = None
