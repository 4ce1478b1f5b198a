"""RecallService: protobuf in, domain handlers, protobuf out."""

from __future__ import annotations

from memgrid.v1 import recall_service_pb2 as pb
from memgrid.v1 import recall_service_pb2_grpc as pb_grpc
from services.core.codec import memory_to_pb, relation_seen_from, status_to_pb
from services.core.grpc.tenant import tenant_of
from services.recall.handlers import RecallHandlers


class RecallServicer(pb_grpc.RecallServiceServicer):
    """RPCs not overridden here answer UNIMPLEMENTED."""

    def __init__(self, handlers: RecallHandlers):
        self._handlers = handlers

    async def GetMemory(self, request: pb.GetMemoryRequest, context) -> pb.GetMemoryResponse:
        memory, relations = await self._handlers.get_memory(tenant_of(context), request.id)
        return pb.GetMemoryResponse(
            memory=memory_to_pb(memory),
            relations=[relation_seen_from(memory.id, r) for r in relations],
            state="current",
        )

    async def GetSystemStatus(self, request: pb.GetSystemStatusRequest, context) -> pb.GetSystemStatusResponse:
        count, components = await self._handlers.system_status()
        return pb.GetSystemStatusResponse(memory_count=count, components=[status_to_pb(c) for c in components])
