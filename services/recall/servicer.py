"""RecallService: protobuf in, domain handlers, protobuf out."""

from __future__ import annotations

from memgrid.v1 import memory_pb2
from memgrid.v1 import recall_service_pb2 as pb
from memgrid.v1 import recall_service_pb2_grpc as pb_grpc
from services.core.codec import memory_to_pb, relation_seen_from, status_to_pb
from services.core.domain.errors import InvalidArgument
from services.core.grpc.tenant import tenant_of
from services.recall.handlers import RecallHandlers


class RecallServicer(pb_grpc.RecallServiceServicer):
    """RPCs not overridden here answer UNIMPLEMENTED."""

    def __init__(self, handlers: RecallHandlers, default_limit: int):
        self._handlers = handlers
        self._default_limit = default_limit

    async def GetMemory(self, request: pb.GetMemoryRequest, context) -> pb.GetMemoryResponse:
        memory, relations = await self._handlers.get_memory(tenant_of(context), request.id)
        return pb.GetMemoryResponse(
            memory=memory_to_pb(memory),
            relations=[relation_seen_from(memory.id, r) for r in relations],
            state="current",
        )

    async def SearchMemories(self, request: pb.SearchMemoriesRequest, context) -> pb.SearchMemoriesResponse:
        """The vector arm only, for now: `embedding` is required (the full
        hybrid recall replaces this)."""
        if not request.embedding:
            raise InvalidArgument("EMBEDDING_REQUIRED", "'embedding' is required", field="embedding")
        found = await self._handlers.search_by_vector(
            tenant_of(context),
            list(request.embedding),
            limit=request.limit or self._default_limit,
            min_score=request.min_score if request.HasField("min_score") else None,
            current=request.state_mode != memory_pb2.STATE_MODE_HISTORY,
        )
        results = [
            pb.RecallResult(
                memory=memory_to_pb(m, with_embedding=False),
                match_type="vector",
                match_score=score,
                final_score=score,
                score_components={"vector": score},
            )
            for m, score in found
        ]
        return pb.SearchMemoriesResponse(results=results, count=len(results))

    async def FindSimilar(self, request: pb.FindSimilarRequest, context) -> pb.FindSimilarResponse:
        found = await self._handlers.find_similar(
            tenant_of(context),
            [(q.exclude_id, list(q.embedding)) for q in request.queries],
            limit=request.limit or self._default_limit,
            min_score=request.min_score,
        )
        return pb.FindSimilarResponse(
            results=[
                pb.FindSimilarResponse.Neighbours(
                    memories=[
                        pb.SimilarMemory(id=h.id, score=h.score, source=(h.payload or {}).get("source") or "")
                        for h in hits
                    ]
                )
                for hits in found
            ]
        )

    async def GetSystemStatus(self, request: pb.GetSystemStatusRequest, context) -> pb.GetSystemStatusResponse:
        count, components = await self._handlers.system_status()
        return pb.GetSystemStatusResponse(memory_count=count, components=[status_to_pb(c) for c in components])
