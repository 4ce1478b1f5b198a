"""gRPC channels and stubs to the four services, and the signers of the
claim every call carries (services/core/grpc/claims.py), one per service.

A route names the caller (`ClaimFor`, what routes/calls.py's call_options
puts as the call's metadata); the stub it calls signs a claim for its own
service only, so a claim captured on the way to recall is refused by ingest."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2_grpc

from memgrid.v1 import (
    audit_service_pb2_grpc,
    consolidate_service_pb2_grpc,
    enrich_service_pb2_grpc,
    ingest_service_pb2_grpc,
    recall_service_pb2_grpc,
)
from services.core.grpc.balancing import RetryPolicy, channel_options
from services.core.grpc.claims import ClaimSigner
from services.core.grpc.plane import ServicePlane
from services.core.grpc.server import MAX_MESSAGE_BYTES, message_options
from services.core.settings import SERVICE_NAMES, PlaneSettings


@dataclass(frozen=True, slots=True)
class ClaimFor:
    """Who a call is made for, not yet signed: the stub the call goes
    through signs it for its own service (SigningStub)."""

    tenant: str | None
    role: str
    memory_limit: int | None = None
    actor: str | None = None


class SigningStub:
    """A service's stub whose calls, given `metadata=ClaimFor(...)`, carry a
    claim signed for that service alone; any other metadata goes as it is."""

    def __init__(self, stub: Any, signer: ClaimSigner):
        self._stub = stub
        self._signer = signer

    def __getattr__(self, name: str):
        method = getattr(self._stub, name)
        signer = self._signer

        def call(request, *, metadata=None, **options):
            if isinstance(metadata, ClaimFor):
                metadata = signer.metadata(metadata.tenant, metadata.role, metadata.memory_limit, metadata.actor)
            return method(request, metadata=metadata, **options)

        return call


@dataclass
class ServiceClients:
    channels: dict[str, grpc.aio.Channel]
    ingest: ingest_service_pb2_grpc.IngestServiceStub
    recall: recall_service_pb2_grpc.RecallServiceStub
    enrich: enrich_service_pb2_grpc.EnrichServiceStub
    consolidate: consolidate_service_pb2_grpc.ConsolidateServiceStub
    health: dict[str, health_pb2_grpc.HealthStub]
    #: Signs each call's claim, per service (its audience): the caller's tenant, role, memory limit and actor.
    signers: dict[str, ClaimSigner]
    #: The audit log's reads, served by recall (audit_service.proto).
    audit: audit_service_pb2_grpc.AuditServiceStub | None = None

    def signer(self, service: str) -> ClaimSigner:
        """The signer of claims for `service` (a call made without ClaimFor)."""
        return self.signers[service]

    @classmethod
    def connect(
        cls,
        targets: dict[str, str],
        plane: ServicePlane,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        retry: RetryPolicy | None = None,
    ) -> ServiceClients:
        """Channels to `targets` (TLS when the plane has it), signing with the
        plane's key, bounding messages as the services do (GRPC_MAX_MESSAGE_BYTES).
        A target may name several replicas: calls go round robin to those whose
        health is SERVING, and `retry` repeats the safe ones refused UNAVAILABLE
        on another (services/core/grpc/balancing.py)."""
        retry = retry or RetryPolicy()
        channels = {
            name: plane.channel(
                targets[name], options=[*message_options(max_message_bytes), *channel_options(name, retry)]
            )
            for name in SERVICE_NAMES
        }
        signers = {name: plane.signer("system:gateway", name) for name in SERVICE_NAMES}

        def stub(name: str, make):
            return SigningStub(make(channels[name]), signers[name])

        return cls(
            channels=channels,
            ingest=stub("ingest", ingest_service_pb2_grpc.IngestServiceStub),
            recall=stub("recall", recall_service_pb2_grpc.RecallServiceStub),
            enrich=stub("enrich", enrich_service_pb2_grpc.EnrichServiceStub),
            consolidate=stub("consolidate", consolidate_service_pb2_grpc.ConsolidateServiceStub),
            health={name: health_pb2_grpc.HealthStub(ch) for name, ch in channels.items()},
            signers=signers,
            audit=stub("recall", audit_service_pb2_grpc.AuditServiceStub),
        )

    @classmethod
    def from_settings(cls, plane: PlaneSettings, data_dir: Path) -> ServiceClients:
        """Channels to every service (`data_dir`: where a generated claim key is kept)."""
        return cls.connect(
            {name: plane.grpc_target(name) for name in SERVICE_NAMES},
            ServicePlane.from_settings(plane, data_dir),
            plane.grpc_max_message_bytes,
            RetryPolicy(max_attempts=plane.grpc_retry_attempts),
        )

    async def close(self) -> None:
        for channel in self.channels.values():
            await channel.close()
