"""The service plane: where each service listens and is dialled, TLS, and the signed claims every call carries."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, model_validator

from services.core.settings.base import Group

#: gRPC ports of the four services and their metrics ports, in one table so
#: the launcher, the gateway and the services agree.
DEFAULT_GRPC_PORTS = {"ingest": 50051, "recall": 50052, "enrich": 50053, "consolidate": 50054}
DEFAULT_METRICS_PORTS = {"ingest": 9101, "recall": 9102, "enrich": 9103, "consolidate": 9104}
SERVICE_NAMES = tuple(DEFAULT_GRPC_PORTS)


class PlaneSettings(Group):
    """The service plane: where each service listens and is dialled, gRPC bounds, signed claims, TLS."""

    # Service addresses: each service listens on GRPC_LISTEN_HOST and its own port; the gateway, enrich and
    # the tools dial the *_ADDR addresses (host:port; unset: GRPC_HOST, else 127.0.0.1, and the service's port).
    grpc_listen_host: str = "127.0.0.1"  # where each service (and its metrics) listens; 0.0.0.0 in a pod
    ingest_addr: str | None = None  # where the others dial ingest, host:port (or several, below)
    recall_addr: str | None = None  # where the others dial recall
    enrich_addr: str | None = None  # where the others dial enrich
    consolidate_addr: str | None = None  # where the others dial consolidate
    # An *_ADDR may name several replicas: IP address:ports comma-separated (10.0.0.5:50052,10.0.0.6:50052),
    # or one DNS name resolving to all of them (dns:///recall-headless:50052). Calls go round robin to those
    # whose health is SERVING; a read, or a create (carrying an idempotency key), refused UNAVAILABLE by a
    # replica that died is tried again on another, up to this many attempts in all (gRPC allows 5).
    grpc_retry_attempts: int = Field(default=3, ge=1, le=5)
    # A server closes each client connection this long after it opened (GOAWAY; calls in flight finish, the
    # client reconnects at once): a client dialling one DNS name for every replica resolves it again and
    # finds replicas added since (gRPC resolves again only when a connection goes). 0: connections stay.
    grpc_max_connection_age_seconds: float = Field(default=0.0, ge=0)
    # Deprecated (one release): one host for both listening and dialling; GRPC_LISTEN_HOST and *_ADDR win.
    grpc_host: str | None = None
    ingest_grpc_port: int = DEFAULT_GRPC_PORTS["ingest"]  # each service's gRPC port ...
    recall_grpc_port: int = DEFAULT_GRPC_PORTS["recall"]
    enrich_grpc_port: int = DEFAULT_GRPC_PORTS["enrich"]
    consolidate_grpc_port: int = DEFAULT_GRPC_PORTS["consolidate"]
    ingest_metrics_port: int = DEFAULT_METRICS_PORTS["ingest"]  # ... and Prometheus port
    recall_metrics_port: int = DEFAULT_METRICS_PORTS["recall"]
    enrich_metrics_port: int = DEFAULT_METRICS_PORTS["enrich"]
    consolidate_metrics_port: int = DEFAULT_METRICS_PORTS["consolidate"]

    # Calls between processes.
    grpc_timeout_seconds: float = 10.0  # the gateway's deadline for a call to a service
    # The largest gRPC message a service takes or sends: a larger one is refused with RESOURCE_EXHAUSTED
    # before it is handled, and the service stays up. Well above what MAX_REQUEST_BYTES of JSON becomes.
    grpc_max_message_bytes: int = Field(default=256 * 1024 * 1024, ge=4 * 1024 * 1024)

    # Claims (docs/auth-and-tenants.md): every call to a service carries a claim (tenant, role,
    # memory limit, actor) signed with HMAC-SHA256 over this key, which every process of a deployment shares
    # (a Secret in a pod); unset: the file service_claim_key in MEMGRID_DATA_DIR, generated on first start.
    service_claim_key: SecretStr | None = Field(default=None, min_length=32)  # at least 32 characters
    # Also accepted, never signed with: rotating the key without downtime (docs/auth-and-tenants.md).
    service_claim_previous_key: SecretStr | None = Field(default=None, min_length=32)
    # A claim's lifetime: the signer makes one per call, so a captured one is useless after this; plus an
    # allowance for the clocks of two hosts differing.
    service_claim_ttl_seconds: float = Field(default=60.0, gt=0)
    service_claim_skew_seconds: float = Field(default=5.0, ge=0)  # the clock allowance past a claim's expiry
    # TLS on every gRPC server and client, on when the certificate and its key are set (PEM files). With a
    # CA file, servers also require client certificates it signed (mutual TLS) and clients verify the
    # servers with it; without one, clients verify against the system's roots.
    grpc_tls_cert_file: Path | None = None  # this process's certificate (chain), PEM
    grpc_tls_key_file: Path | None = None  # its private key, PEM
    grpc_tls_ca_file: Path | None = None  # the CA that signed the others' certificates, PEM
    grpc_tls_server_name: str | None = None  # the name clients expect in the servers' certificates; unset: the host

    def grpc_port(self, service: str) -> int:
        """The gRPC port of a service by name."""
        return getattr(self, f"{service}_grpc_port")

    def metrics_port(self, service: str) -> int:
        """The Prometheus port of a service by name."""
        return getattr(self, f"{service}_metrics_port")

    def grpc_target(self, service: str) -> str:
        """The address (host:port) the gateway, enrich and the tools dial for a service."""
        addr = getattr(self, f"{service}_addr")
        return addr or f"{self.grpc_host or '127.0.0.1'}:{self.grpc_port(service)}"

    @property
    def listen_host(self) -> str:
        """Where the services listen: GRPC_LISTEN_HOST, or the deprecated GRPC_HOST when only it is set."""
        if self.grpc_host and "grpc_listen_host" not in self.model_fields_set:
            return self.grpc_host
        return self.grpc_listen_host

    @model_validator(mode="after")
    def _tls_complete(self) -> PlaneSettings:
        cert, key, ca = self.grpc_tls_cert_file, self.grpc_tls_key_file, self.grpc_tls_ca_file
        if (cert is None) != (key is None) or (ca is not None and cert is None):
            raise ValueError(
                "GRPC_TLS_CERT_FILE and GRPC_TLS_KEY_FILE go together (TLS is on with both), "
                "and GRPC_TLS_CA_FILE needs them"
            )
        return self
