"""IngestService: protobuf in, domain handlers, protobuf out."""

from __future__ import annotations

from memgrid.v1 import ingest_service_pb2 as pb
from memgrid.v1 import ingest_service_pb2_grpc as pb_grpc
from services.core.codec import draft_from_pb, memory_to_pb
from services.core.grpc.tenant import tenant_of
from services.ingest.handlers import IngestHandlers


class IngestServicer(pb_grpc.IngestServiceServicer):
    """RPCs not overridden here answer UNIMPLEMENTED."""

    def __init__(self, handlers: IngestHandlers):
        self._handlers = handlers

    async def CreateMemory(self, request: pb.CreateMemoryRequest, context) -> pb.CreateMemoryResponse:
        created = await self._handlers.create_memory(tenant_of(context), draft_from_pb(request.memory))
        memory = created.memory
        return pb.CreateMemoryResponse(
            memory=memory_to_pb(memory),
            qdrant="queued",
            embedding_status="stored" if memory.embedding is not None else "queued",
            enrichment="queued" if created.event_published else "pending",
        )
