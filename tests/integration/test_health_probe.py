"""deploy/image/health_probe.py, the prod overlay's exec probe: it answers
with the exit code of a grpc.health.v1 check of the service on this host."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from devstack.servers import free_port
from services.core.grpc.plane import ServicePlane
from tests.deploy.conftest import ROOT

pytestmark = pytest.mark.integration

PROBE = ROOT / "deploy" / "image" / "health_probe.py"


@pytest.fixture
async def health_server():
    """A gRPC server with only the health service, on a free port: (port, servicer)."""
    server = grpc.aio.server()
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield port, servicer
    await server.stop(0)


async def probe(service: str, port: int, *grpc_service: str, **settings: str) -> int:
    """The probe's exit code, run as the kubelet runs it (its own process), for `service` on `port`
    (and the gRPC service name, when given)."""
    env = {**os.environ, f"{service.upper()}_GRPC_PORT": str(port), "HEALTH_CHECK_TIMEOUT_SECONDS": "0.5", **settings}
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(PROBE), service, *grpc_service, env=env, cwd=ROOT, stderr=subprocess.DEVNULL
    )
    return await asyncio.wait_for(process.wait(), timeout=30)


async def test_the_probe_passes_while_serving_and_fails_otherwise(health_server):
    port, servicer = health_server
    await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    assert await probe("recall", port) == 0
    await servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)  # starting, or draining on SIGTERM
    assert await probe("recall", port) == 1


async def test_the_readiness_probe_asks_for_the_named_service_and_liveness_for_the_overall_status(health_server):
    """Recall's readiness names memgrid.v1.RecallService, NOT_SERVING while its projection catches up."""
    port, servicer = health_server
    await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    await servicer.set("memgrid.v1.RecallService", health_pb2.HealthCheckResponse.NOT_SERVING)
    assert await probe("recall", port) == 0
    assert await probe("recall", port, "memgrid.v1.RecallService") == 1
    await servicer.set("memgrid.v1.RecallService", health_pb2.HealthCheckResponse.SERVING)
    assert await probe("recall", port, "memgrid.v1.RecallService") == 0


async def test_the_probe_fails_when_nothing_listens_and_refuses_an_unknown_service():
    assert await probe("ingest", free_port()) == 1
    assert await probe("nonsense", free_port()) == 2


def make_certificates(directory) -> dict[str, str]:
    """A CA, and a certificate it signed for the name `recall` (as the prod Secret holds one): file paths."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=test-ca",
            "-keyout", "ca.key", "-out", "ca.crt")  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=recall", "-keyout", "tls.key", "-out", "tls.csr")
    (directory / "san.ext").write_text("subjectAltName=DNS:recall\n")
    openssl("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1",
            "-extfile", "san.ext", "-out", "tls.crt")  # fmt: skip
    return {name: str(directory / f"{name}") for name in ("tls.crt", "tls.key", "ca.crt")}


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl makes the test certificates")
async def test_the_probe_speaks_mutual_tls_as_the_prod_services_do(tmp_path):
    files = make_certificates(tmp_path)
    plane = ServicePlane(key=b"", tls_cert_file=files["tls.crt"], tls_key_file=files["tls.key"],
                         tls_ca_file=files["ca.crt"])  # fmt: skip
    server = grpc.aio.server()
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = plane.add_port(server, "127.0.0.1:0")  # client certificates required, as in prod
    await server.start()
    try:
        await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        tls = {"GRPC_TLS_CERT_FILE": files["tls.crt"], "GRPC_TLS_KEY_FILE": files["tls.key"],
               "GRPC_TLS_CA_FILE": files["ca.crt"]}  # fmt: skip
        assert await probe("recall", port, **tls) == 0
        assert await probe("recall", port) == 1  # plaintext, as the kubelet's own gRPC probe: refused
    finally:
        await server.stop(0)
