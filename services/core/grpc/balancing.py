"""Client-side balancing over a service's replicas, done by gRPC itself.

A service's address (INGEST_ADDR, RECALL_ADDR, ...) is one `host:port`,
several IP `address:port`s comma-separated, or a gRPC target with its scheme
(`dns:///recall-headless:50052`, one name resolving to every replica, as a
Kubernetes headless Service does). The channel's service config spreads calls
round robin over every address that answers, skips a replica whose health
service says NOT_SERVING for the service it dials (a recall still catching up,
one shutting down), and retries a call refused with UNAVAILABLE (a replica
that died mid-call) on another replica, for the methods safe to repeat: reads,
and the writes the gateway gives an idempotency key (gateway/routes/memories.py).
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass

#: Schemes gRPC resolves itself: a target with one of these passes as it is.
SCHEMES = ("dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:", "vsock:")

#: Methods a retry may repeat, per gRPC service: `None` is every method of the
#: service. Reads; ingest's creating writes, which carry an idempotency key
#: (the gateway adds one when the client sent none), so a repeat replays the
#: first result. Not retried: RebuildIndex (a replica's own index, long) and
#: WatchMemoryEvents (the gateway's watch reconnects itself), deletes, updates.
RETRYABLE: dict[str, tuple[str, ...] | None] = {
    "memgrid.v1.RecallService": (
        "GetMemory",
        "SearchMemories",
        "ListMemoriesByTag",
        "ExportMemories",
        "ListRelatedMemories",
        "StartupRecall",
        "AnalyzeMemories",
        "GetGraphSnapshot",
        "ListNeighbors",
        "GetGraphStats",
        "ListMemoryTypes",
        "ListRelationTypes",
        "FindSimilar",
        "GetSystemStatus",
        "ListReviewQueue",
        "ListTombstones",
    ),
    "memgrid.v1.AuditService": None,
    "memgrid.v1.IngestService": ("CreateMemory", "BatchCreateMemories"),
    "memgrid.v1.EnrichService": ("GetEnrichmentStatus",),
    "memgrid.v1.ConsolidateService": ("GetConsolidationStatus", "ListBackups"),
    "grpc.health.v1.Health": ("Check",),
}

#: The gRPC service each memgrid service is dialled for: its health status
#: (SERVING once ready) is what client-side health checking watches.
HEALTH_SERVICE = {
    "ingest": "memgrid.v1.IngestService",
    "recall": "memgrid.v1.RecallService",
    "enrich": "memgrid.v1.EnrichService",
    "consolidate": "memgrid.v1.ConsolidateService",
}


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """gRPC's retryPolicy for UNAVAILABLE: attempts in all (the first one
    included; gRPC caps it at 5) and the exponential backoff between them."""

    max_attempts: int = 3
    initial_backoff_seconds: float = 0.05
    max_backoff_seconds: float = 1.0
    multiplier: float = 2.0

    def config(self) -> dict:
        return {
            "maxAttempts": self.max_attempts,
            "initialBackoff": f"{self.initial_backoff_seconds:g}s",
            "maxBackoff": f"{self.max_backoff_seconds:g}s",
            "backoffMultiplier": self.multiplier,
            "retryableStatusCodes": ["UNAVAILABLE"],
        }


def channel_target(address: str) -> str:
    """The gRPC target for a service's address: as it is with a scheme or
    for one `host:port`; `ipv4:`/`ipv6:` for a comma-separated list of IP
    addresses. A list naming hosts is refused (ValueError): gRPC resolves one
    name per target, so several replicas by name are one DNS name that
    resolves to all of them."""
    parts = [p.strip() for p in address.split(",") if p.strip()]
    if not parts:
        raise ValueError("a service address is empty")
    if len(parts) == 1:
        return parts[0]
    families = set()
    for part in parts:
        if part.startswith(SCHEMES):
            raise ValueError(f"{address!r}: a list takes address:port entries, not targets with a scheme")
        host, _, port = part.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"{address!r}: {part!r} is not address:port")
        try:
            ip = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            raise ValueError(
                f"{address!r}: a list of replicas takes IP addresses ({part!r} names a host); "
                "for names, give one DNS name that resolves to every replica (dns:///name:port)"
            ) from None
        families.add(ip.version)
    if len(families) > 1:
        raise ValueError(f"{address!r}: a list is all IPv4 or all IPv6")
    return ("ipv4:" if families == {4} else "ipv6:") + ",".join(parts)


def service_config(health_service: str | None, retry: RetryPolicy) -> str:
    """The channel's service config (JSON): round robin over every resolved
    address, client-side health checking of `health_service` (None: none),
    and `retry` on the RETRYABLE methods."""
    names = []
    for service, methods in RETRYABLE.items():
        if methods is None:
            names.append({"service": service})
        else:
            names.extend({"service": service, "method": method} for method in methods)
    config: dict = {
        "loadBalancingConfig": [{"round_robin": {}}],
        "methodConfig": [{"name": names, "retryPolicy": retry.config()}],
    }
    if health_service is not None:
        config["healthCheckConfig"] = {"serviceName": health_service}
    return json.dumps(config)


def channel_options(service: str, retry: RetryPolicy) -> list[tuple[str, object]]:
    """The channel options that balance, health-check and retry calls to `service` (ingest, recall, ...)."""
    return [
        ("grpc.service_config", service_config(HEALTH_SERVICE.get(service), retry)),
        ("grpc.enable_retries", 1),
    ]
