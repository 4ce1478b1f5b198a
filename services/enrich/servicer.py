"""EnrichService: status and reprocessing (the pipeline itself is driven by events)."""

from __future__ import annotations

import asyncio
import json

from memgrid.v1 import enrich_service_pb2 as pb
from memgrid.v1 import enrich_service_pb2_grpc as pb_grpc
from services.core.domain.errors import InvalidArgument
from services.core.domain.ids import validate_memory_id
from services.core.grpc.tenant import tenant_of
from services.core.ports import EventBacklog
from services.enrich.embedding import EmbeddingStage
from services.enrich.pipeline import EnrichmentPipeline
from services.enrich.reconciler import Reconciler
from services.enrich.reembed import Reembedder


class EnrichServicer(pb_grpc.EnrichServiceServicer):
    def __init__(
        self,
        pipeline: EnrichmentPipeline,
        consumer: EventBacklog,
        reconciler: Reconciler,
        max_attempts: int,
        reembedder: Reembedder | None = None,
        *,
        embedding: EmbeddingStage | None = None,
        embed_consumer: EventBacklog | None = None,
    ):
        """`consumer` is the enrichment stage's; `embedding` and `embed_consumer` the first stage's."""
        self._pipeline = pipeline
        self._consumer = consumer
        self._reconciler = reconciler
        self._max_attempts = max_attempts
        self._reembedder = reembedder
        self._embedding = embedding
        self._embed_consumer = embed_consumer
        self._background: set[asyncio.Task] = set()

    async def ReprocessMemories(self, request: pb.ReprocessMemoriesRequest, context) -> pb.ReprocessMemoriesResponse:
        """Queue a forced re-run of enrichment for these ids (202 at the gateway)."""
        if not request.ids:
            raise InvalidArgument("IDS_REQUIRED", "'ids' must name at least one memory", field="ids")
        ids = [validate_memory_id(i, "ids") for i in request.ids]
        task = asyncio.create_task(self._pipeline.enrich_ids(tenant_of(context), ids, forced=True))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return pb.ReprocessMemoriesResponse(ids=ids, count=len(ids))

    async def GetEnrichmentStatus(self, request, context) -> pb.GetEnrichmentStatusResponse:
        stats = self._pipeline.stats
        queue = await self._consumer.pending()
        return pb.GetEnrichmentStatusResponse(
            status="running",
            queue_size=queue,
            pending=await self._reconciler.pending(tenant_of(context)),
            inflight=stats.inflight,
            processed=stats.processed,
            failed=stats.failed,
            max_attempts=self._max_attempts,
            stats_json=json.dumps(
                {
                    "skipped": stats.skipped,
                    "conflicts": stats.conflicts,
                    "reconciled": self._reconciler.redriven,
                    "last_batch_seconds": round(stats.last_batch_seconds, 4),
                    "failures_by_reason": stats.by_reason,
                    "reembed": self._reembedder.status(tenant_of(context)) if self._reembedder else None,
                    "embedding": await self._embedding_status(tenant_of(context)),
                }
            ),
        )

    async def _embedding_status(self, tenant: str) -> dict | None:
        """The first stage: its queue, the tenant's memories without a vector, its counts."""
        if self._embedding is None:
            return None
        return {
            "queue_size": await self._embed_consumer.pending() if self._embed_consumer else 0,
            "pending": await self._reconciler.pending_embeddings(tenant),
            "reconciled": self._reconciler.redriven_embeddings,
            **self._embedding.stats.to_dict(),
        }

    async def ReembedMemories(self, request: pb.ReembedMemoriesRequest, context) -> pb.ReembedMemoriesResponse:
        """Queue a re-embed of the named memories, or of every memory of the tenant (202 at the gateway)."""
        if request.batch_size < 0:
            raise InvalidArgument("INVALID_ARGUMENT", "batch_size must be 0 or more", field="batch_size")
        ids = [validate_memory_id(i, "ids") for i in request.ids]
        queued = await self._reembedder.queue(tenant_of(context), ids, request.batch_size)
        return pb.ReembedMemoriesResponse(queued=queued)
