"""ConsolidateService: backups; consolidation itself answers UNIMPLEMENTED until its issue lands."""

from __future__ import annotations

from memgrid.v1 import consolidate_service_pb2 as pb
from memgrid.v1 import consolidate_service_pb2_grpc as pb_grpc
from services.consolidate.backup import BackupWriter
from services.core.domain.errors import Unimplemented
from services.core.grpc.tenant import tenant_of

#: What POST /consolidate and GET /consolidate/status answer (501) until consolidation is built.
NOT_BUILT = (
    "consolidation (decay, creative association, clustering, forgetting) is not built yet; it lands with its own issue"
)


class ConsolidateServicer(pb_grpc.ConsolidateServiceServicer):
    """RPCs not overridden here answer UNIMPLEMENTED."""

    def __init__(self, backups: BackupWriter | None = None):
        self._backups = backups

    async def RunConsolidation(self, request: pb.RunConsolidationRequest, context) -> pb.RunConsolidationResponse:
        raise Unimplemented("CONSOLIDATION_NOT_BUILT", NOT_BUILT)

    async def GetConsolidationStatus(
        self, request: pb.GetConsolidationStatusRequest, context
    ) -> pb.GetConsolidationStatusResponse:
        raise Unimplemented("CONSOLIDATION_NOT_BUILT", NOT_BUILT)

    async def CreateBackup(self, request: pb.CreateBackupRequest, context) -> pb.CreateBackupResponse:
        """Write the caller's tenant's graph to a backup file (see services/consolidate/backup.py)."""
        result = await self._backups.create(tenant_of(context))
        return pb.CreateBackupResponse(
            path=str(result.path),
            memories=result.memories,
            relations=result.relations,
            entities=result.entities,
            patterns=result.patterns,
        )
