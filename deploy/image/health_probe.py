"""python /app/health_probe.py <service>: exit 0 when the memgrid service in
this pod answers grpc.health.v1 SERVING, else 1.

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
from services.core.settings import SERVICE_NAMES, Settings


async def check(service: str, settings: Settings, deadline_seconds: float) -> bool:
    """Whether `service` on this host answers SERVING within `deadline_seconds`."""
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
        reply = await stub.Check(health_pb2.HealthCheckRequest(), timeout=deadline_seconds)
    except Exception as exc:  # unreachable, a TLS failure, a deadline: not healthy
        print(f"{service}: {exc}", file=sys.stderr)
        return False
    finally:
        await channel.close()
    return reply.status == health_pb2.HealthCheckResponse.SERVING


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] not in SERVICE_NAMES:
        print(f"usage: health_probe.py <{'|'.join(SERVICE_NAMES)}>", file=sys.stderr)
        return 2
    settings = Settings()
    return 0 if asyncio.run(check(argv[1], settings, settings.health_check_timeout_seconds * 3)) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
