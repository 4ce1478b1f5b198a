"""The gateway's own settings: HTTP, tokens, request bounds, health, the event stream."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from services.core.settings.base import Group


class GatewaySettings(Group):
    """The gateway: its HTTP port, its tokens, the bounds of what it takes, /health and /stream."""

    # HTTP and tokens.
    port: int = 8001  # the gateway's HTTP port
    # The gateway's Prometheus port: never the public one, so an Ingress routing PORT does not expose it.
    gateway_metrics_port: int = 9100
    gateway_host: str | None = None  # None: 0.0.0.0 with a configured token, else 127.0.0.1
    automem_api_token: str | None = None  # single-tenant token; unset, and no tokens file: generated (data/api_token)
    admin_api_token: str | None = None  # X-Admin-Token, which admin routes need with AUTOMEM_API_TOKEN
    default_tenant: str = "default"  # the tenant of AUTOMEM_API_TOKEN
    # Many tenants: a JSON list of {token_sha256, tenant, role[, memory_limit]} (gateway/tokens_file.py).
    memgrid_tokens_file: Path | None = None
    tokens_file_check_seconds: float = 1.0  # how often the file is checked for changes
    # Larger bodies are a 413 (gateway/body_limit.py); sized for a 500-item batch with 1536-dimension embeddings.
    max_request_bytes: int = Field(default=32 * 1024 * 1024, ge=1)
    cors_allow_origins: str = "*"  # comma-separated origins allowed by CORS; * any (AutoMem's flask-cors default)

    # Quotas: memories a tenant may hold; a tokens file entry's memory_limit wins. None: unlimited.
    tenant_memory_limit: int | None = Field(default=None, ge=0)  # the default memory limit of every tenant

    # GET /health.
    health_check_timeout_seconds: float = 1.0  # per service health probe in GET /health
    health_status_timeout_seconds: float = 2.0  # recall's store report in GET /health

    # Admin and exports.
    admin_timeout_seconds: float = 3600.0  # the gateway's deadline for /admin/reindex, /backup and /restore

    # Server-sent events (/stream): per subscriber, events buffered before
    # newer ones are dropped (and counted), and the keepalive comment period.
    stream_buffer_size: int = 256
    stream_keepalive_seconds: float = 15.0
