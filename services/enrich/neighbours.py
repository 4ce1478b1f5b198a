"""Neighbours come from recall's vector arm, over gRPC (enrich never reads
the vector index itself: recall owns it)."""

from __future__ import annotations

import grpc
import structlog
from prometheus_client import Counter

from memgrid.v1 import recall_service_pb2, recall_service_pb2_grpc
from services.core.domain.projection import VectorHit
from services.core.grpc.balancing import RetryPolicy, channel_options
from services.core.grpc.plane import ServicePlane

log = structlog.get_logger()
UNAVAILABLE = Counter("memgrid_enrichment_neighbour_failures_total", "Neighbour searches recall could not answer")


class RecallNeighbours:
    """NeighbourFinder over RecallService.SearchMemories."""

    def __init__(self, target: str, timeout_seconds: float, plane: ServicePlane):
        self._target = target
        self._timeout = timeout_seconds
        self._plane = plane
        # A search for one tenant's neighbours, signed as enrich's own call.
        self._claims = plane.signer("system:enrich", "recall")
        self._channel: grpc.aio.Channel | None = None
        self._stub: recall_service_pb2_grpc.RecallServiceStub | None = None

    async def neighbours(self, tenant: str, queries, *, limit: int, min_score: float) -> list[list[VectorHit]]:
        if not queries:
            return []
        if self._stub is None:
            # Spread over recall's replicas and retried on another when one dies, as the gateway does.
            self._channel = self._plane.channel(self._target, options=channel_options("recall", RetryPolicy()))
            self._stub = recall_service_pb2_grpc.RecallServiceStub(self._channel)
        request = recall_service_pb2.FindSimilarRequest(
            queries=[recall_service_pb2.FindSimilarRequest.Query(embedding=v, exclude_id=i) for i, v in queries],
            limit=limit,
            min_score=min_score,
        )
        try:
            reply = await self._stub.FindSimilar(
                request, metadata=self._claims.metadata(tenant, "read"), timeout=self._timeout
            )
        except grpc.aio.AioRpcError as exc:
            # Without recall, enrichment goes on without SIMILAR_TO links rather than stalling.
            UNAVAILABLE.inc()
            log.warning("neighbour search failed", code=exc.code().name)
            return [[] for _ in queries]
        return [
            [VectorHit(m.id, m.score, {"source": m.source or None}) for m in result.memories]
            for result in reply.results
        ]

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = self._stub = None
