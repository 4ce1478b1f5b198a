"""EnrichService: status and reprocessing (the pipeline itself is driven by events)."""

from __future__ import annotations

import asyncio
import json

from memgrid.v1 import enrich_service_pb2 as pb
from memgrid.v1 import enrich_service_pb2_grpc as pb_grpc
from services.core.domain.errors import InvalidArgument
from services.core.domain.ids import validate_memory_id
from services.core.grpc.tenant import is_operator, tenant_of
from services.core.ports.events import EventBacklog
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
        reprocess_max_ids: int = 500,
    ):
        """`consumer` is the enrichment stage's; `embedding` and `embed_consumer` the first stage's;
        `reprocess_max_ids` the ids one ReprocessMemories takes (ENRICHMENT_REPROCESS_MAX_IDS)."""
        self._pipeline = pipeline
        self._consumer = consumer
        self._reconciler = reconciler
        self._max_attempts = max_attempts
        self._reembedder = reembedder
        self._embedding = embedding
        self._embed_consumer = embed_consumer
        self._reprocess_max = reprocess_max_ids
        self._background: set[asyncio.Task] = set()

    async def ReprocessMemories(self, request: pb.ReprocessMemoriesRequest, context) -> pb.ReprocessMemoriesResponse:
        """Queue a forced re-run of enrichment for these ids (202 at the gateway)."""
        if not request.ids:
            raise InvalidArgument("IDS_REQUIRED", "'ids' must name at least one memory", field="ids")
        if len(request.ids) > self._reprocess_max:
            # Each id is a forced run of the models: one call may not queue an unbounded amount of work.
            raise InvalidArgument(
                "TOO_MANY_IDS",
                f"'ids' holds {len(request.ids)} ids; the limit is {self._reprocess_max}"
                " (ENRICHMENT_REPROCESS_MAX_IDS): send them in several calls",
                field="ids",
                count=len(request.ids),
                limit=self._reprocess_max,
            )
        ids = list(dict.fromkeys(validate_memory_id(i, "ids") for i in request.ids))
        task = asyncio.create_task(self._pipeline.enrich_ids(tenant_of(context), ids, forced=True))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return pb.ReprocessMemoriesResponse(ids=ids, count=len(ids))

    async def GetEnrichmentStatus(self, request, context) -> pb.GetEnrichmentStatusResponse:
        """The caller's tenant's enrichment: its memories waiting (pending)
        and in flight, processed, failed (by reason), and the same of the
        embedding stage; its re-embed. The process's own figures (its queues,
        the reconciler's, every tenant's counts) are an operator's only: a
        tenant's caller gets its own counts, queue_size being its memories
        that wait, and `scope: tenant` in stats."""
        tenant = tenant_of(context)
        every = is_operator(context)
        stats = self._pipeline.stats if every else self._pipeline.stats.of(tenant)
        pending = await self._reconciler.pending(tenant)
        return pb.GetEnrichmentStatusResponse(
            status="running",
            queue_size=await self._consumer.pending() if every else pending,
            pending=pending,
            inflight=stats.inflight,
            processed=stats.processed,
            failed=stats.failed,
            max_attempts=self._max_attempts,
            stats_json=json.dumps(
                {
                    "scope": "every tenant" if every else "tenant",
                    "skipped": stats.skipped,
                    "conflicts": stats.conflicts,
                    "reconciled": self._reconciler.redriven
                    if every
                    else self._reconciler.by_tenant.get(tenant, [0, 0])[0],
                    "last_batch_seconds": round(stats.last_batch_seconds, 4),
                    "failures_by_reason": stats.by_reason,
                    "reembed": self._reembedder.status(tenant) if self._reembedder else None,
                    "embedding": await self._embedding_status(tenant, every),
                }
            ),
        )

    async def _embedding_status(self, tenant: str, every: bool) -> dict | None:
        """The first stage: its queue, the tenant's memories without a vector, its counts (the tenant's own
        unless `every`: an operator's call)."""
        if self._embedding is None:
            return None
        pending = await self._reconciler.pending_embeddings(tenant)
        if not every:
            return {
                "queue_size": pending,
                "pending": pending,
                "reconciled": self._reconciler.by_tenant.get(tenant, [0, 0])[1],
                **self._embedding.stats.of(tenant).to_dict(),
            }
        return {
            "queue_size": await self._embed_consumer.pending() if self._embed_consumer else 0,
            "pending": pending,
            "reconciled": self._reconciler.redriven_embeddings,
            **self._embedding.stats.to_dict(),
        }

    async def ReembedMemories(self, request: pb.ReembedMemoriesRequest, context) -> pb.ReembedMemoriesResponse:
        """Queue a re-embed of the named memories, or of every memory of the tenant (202 at the gateway)."""
        if request.batch_size < 0:
            raise InvalidArgument("INVALID_ARGUMENT", "batch_size must be 0 or more", field="batch_size")
        ids = [validate_memory_id(i, "ids") for i in request.ids]
        assert self._reembedder is not None  # noqa: S101  narrows the type: the bootstrap always gives one
        queued = await self._reembedder.queue(tenant_of(context), ids, request.batch_size)
        return pb.ReembedMemoriesResponse(queued=queued)
