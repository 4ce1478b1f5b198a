"""python /app/health_probe.py <service> [<grpc service name>]: exit 0 when
the memgrid service in this pod answers grpc.health.v1 SERVING, else 1. The
check is of the overall status ("") unless a gRPC service name is given:
recall's readiness asks for memgrid.v1.RecallService, which serves only once
its projection caught up (services/recall/readiness.py).

The kubelet's own gRPC probe speaks plaintext only; with GRPC_TLS_* set (the
prod overlay) the services take TLS, client certificates included, so the
probe dials them as any client of the plane does (ServicePlane.channel), on
127.0.0.1 and the service's port, expecting the service's name (or
GRPC_TLS_SERVER_NAME) in its certificate."""

from __future__ import annotations

import asyncio
import sys

from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.core.grpc.plane import ServicePlane
from services.core.settings import SERVICE_NAMES, PlaneSettings, Settings


async def check(service: str, settings: PlaneSettings, deadline_seconds: float, grpc_service: str = "") -> bool:
    """Whether `service` on this host answers SERVING within `deadline_seconds`
    (for `grpc_service`; "": the server's overall status)."""
    plane = ServicePlane(
        key=b"",  # health takes no claim
        tls_cert_file=settings.grpc_tls_cert_file,
        tls_key_file=settings.grpc_tls_key_file,
        tls_ca_file=settings.grpc_tls_ca_file,
        tls_server_name=settings.grpc_tls_server_name or service,
    )
    channel = plane.channel(f"127.0.0.1:{settings.grpc_port(service)}")
    try:
        stub = health_pb2_grpc.HealthStub(channel)
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=grpc_service), timeout=deadline_seconds)
    except Exception as exc:  # unreachable, a TLS failure, a deadline: not healthy
        print(f"{service}: {exc}", file=sys.stderr)
        return False
    finally:
        await channel.close()
    return reply.status == health_pb2.HealthCheckResponse.SERVING


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3) or argv[1] not in SERVICE_NAMES:
        print(f"usage: health_probe.py <{'|'.join(SERVICE_NAMES)}> [<grpc service name>]", file=sys.stderr)
        return 2
    settings = Settings.load("plane", "gateway")
    grpc_service = argv[2] if len(argv) == 3 else ""
    deadline = settings.gateway.health_check_timeout_seconds * 3
    return 0 if asyncio.run(check(argv[1], settings.plane, deadline, grpc_service)) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
