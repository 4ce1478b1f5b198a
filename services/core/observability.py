"""Structured logs and Prometheus metrics, configured once per process."""

from __future__ import annotations

import logging
import sys

import structlog
from prometheus_client import Counter, Histogram, start_http_server


def configure_logging(service: str, *, level: str = "INFO", json_logs: bool = True) -> None:
    """Key-value logs on stderr, JSON by default, each line tagged with the service."""
    logging.basicConfig(stream=sys.stderr, level=level.upper(), format="%(message)s")
    renderer = structlog.processors.JSONRenderer() if json_logs else structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    structlog.contextvars.bind_contextvars(service=service)


def start_metrics_server(port: int, host: str = "0.0.0.0") -> None:  # noqa: S104  a default: every caller passes the listen host setting
    """Serve /metrics for Prometheus on its own HTTP port."""
    start_http_server(port, addr=host)


GRPC_REQUESTS = Counter("memgrid_grpc_requests_total", "gRPC requests handled", ["service", "method", "code"])
#: Calls refused for their claim (services/core/grpc/plane.py): MISSING, MALFORMED, BAD_SIGNATURE, EXPIRED,
#: WRONG_AUDIENCE (a claim made for another service), ROLE (the method, or a field such as every_tenant,
#: needs a role the claim lacks: services/core/grpc/method_roles.py) and NOT_OPERATOR (the servicer's own check).
GRPC_REFUSED = Counter("memgrid_grpc_refused_total", "gRPC calls refused by the service plane", ["service", "reason"])
GRPC_LATENCY = Histogram(
    "memgrid_grpc_request_seconds",
    "gRPC request latency",
    ["service", "method"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
EVENTS_PUBLISHED = Counter("memgrid_events_published_total", "Memory events published", ["kind", "outcome"])
