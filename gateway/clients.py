"""gRPC channels and stubs to the four services, and the signer of the
claim every call carries (services/core/grpc/claims.py)."""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from grpc_health.v1 import health_pb2_grpc

from memgrid.v1 import (
    audit_service_pb2_grpc,
    consolidate_service_pb2_grpc,
    enrich_service_pb2_grpc,
    ingest_service_pb2_grpc,
    recall_service_pb2_grpc,
)
from services.core.grpc.claims import ClaimSigner
from services.core.grpc.plane import ServicePlane
from services.core.grpc.server import MAX_MESSAGE_BYTES, message_options
from services.core.settings import SERVICE_NAMES, Settings


@dataclass
class ServiceClients:
    channels: dict[str, grpc.aio.Channel]
    ingest: ingest_service_pb2_grpc.IngestServiceStub
    recall: recall_service_pb2_grpc.RecallServiceStub
    enrich: enrich_service_pb2_grpc.EnrichServiceStub
    consolidate: consolidate_service_pb2_grpc.ConsolidateServiceStub
    health: dict[str, health_pb2_grpc.HealthStub]
    #: Signs each call's claim: the caller's tenant, role, memory limit and actor.
    claims: ClaimSigner
    #: The audit log's reads, served by recall (audit_service.proto).
    audit: audit_service_pb2_grpc.AuditServiceStub | None = None

    @classmethod
    def connect(
        cls, targets: dict[str, str], plane: ServicePlane, max_message_bytes: int = MAX_MESSAGE_BYTES
    ) -> ServiceClients:
        """Channels to `targets` (TLS when the plane has it), signing with the
        plane's key, bounding messages as the services do (GRPC_MAX_MESSAGE_BYTES)."""
        options = message_options(max_message_bytes)
        channels = {name: plane.channel(targets[name], options=options) for name in SERVICE_NAMES}
        return cls(
            channels=channels,
            ingest=ingest_service_pb2_grpc.IngestServiceStub(channels["ingest"]),
            recall=recall_service_pb2_grpc.RecallServiceStub(channels["recall"]),
            enrich=enrich_service_pb2_grpc.EnrichServiceStub(channels["enrich"]),
            consolidate=consolidate_service_pb2_grpc.ConsolidateServiceStub(channels["consolidate"]),
            health={name: health_pb2_grpc.HealthStub(ch) for name, ch in channels.items()},
            claims=plane.signer("system:gateway"),
            audit=audit_service_pb2_grpc.AuditServiceStub(channels["recall"]),
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> ServiceClients:
        return cls.connect(
            {name: settings.grpc_target(name) for name in SERVICE_NAMES},
            ServicePlane.from_settings(settings),
            settings.grpc_max_message_bytes,
        )

    async def close(self) -> None:
        for channel in self.channels.values():
            await channel.close()
