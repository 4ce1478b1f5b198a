"""The authenticated service plane over real servers: every service refuses a
call without a valid claim (none, forged tenant metadata, another key, an
expired one), takes the tenant and the quota from the claim alone, asks the
admin role for every-tenant operations, and serves over TLS when configured."""

from __future__ import annotations

import subprocess
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from prometheus_client import REGISTRY

from memgrid.v1 import (
    consolidate_service_pb2,
    consolidate_service_pb2_grpc,
    enrich_service_pb2,
    enrich_service_pb2_grpc,
    ingest_service_pb2,
    ingest_service_pb2_grpc,
    memory_pb2,
    recall_service_pb2,
    recall_service_pb2_grpc,
)
from services.consolidate.bootstrap import build_app as build_consolidate
from services.core.grpc.claims import CLAIM_METADATA_KEY, sign_claim
from services.core.grpc.errors import error_info
from services.core.grpc.plane import ServicePlane
from services.core.grpc.server import start
from services.core.settings import SERVICE_NAMES as SERVICES
from services.enrich.bootstrap import build_app as build_enrich
from services.ingest.bootstrap import build_app as build_ingest
from services.recall.bootstrap import build_app as build_recall
from tests.conftest import TEST_CLAIM_KEY, plane_of, signed

pytestmark = pytest.mark.integration

BUILDERS = {"ingest": build_ingest, "recall": build_recall, "enrich": build_enrich, "consolidate": build_consolidate}


def draft(content: str) -> ingest_service_pb2.CreateMemoryRequest:
    return ingest_service_pb2.CreateMemoryRequest(memory=memory_pb2.MemoryDraft(content=content))


#: One call per service, each scoped to the caller's tenant: (service, stub class, method, request).
CALLS = [
    ("ingest", ingest_service_pb2_grpc.IngestServiceStub, "CreateMemory", lambda: draft("a forged write")),
    ("recall", recall_service_pb2_grpc.RecallServiceStub, "GetGraphStats", recall_service_pb2.GetGraphStatsRequest),
    (
        "enrich",
        enrich_service_pb2_grpc.EnrichServiceStub,
        "GetEnrichmentStatus",
        enrich_service_pb2.GetEnrichmentStatusRequest,
    ),
    (
        "consolidate",
        consolidate_service_pb2_grpc.ConsolidateServiceStub,
        "GetConsolidationStatus",
        consolidate_service_pb2.GetConsolidationStatusRequest,
    ),
]


@pytest.fixture
async def stack(settings):
    """All four services, with the test key; yields {name: channel}."""
    running, channels = [], {}
    try:
        for name, build in BUILDERS.items():
            service = await start(
                name, build(settings), host="127.0.0.1", port=0, grace_seconds=1.0, plane=plane_of(settings)
            )
            running.append(service)
            channels[name] = grpc.aio.insecure_channel(f"127.0.0.1:{service.port}")
        yield channels
    finally:
        for channel in channels.values():
            await channel.close()
        for service in running:
            await service.stop()


def refused_count(service: str, reason: str) -> float:
    return REGISTRY.get_sample_value("memgrid_grpc_refused_total", {"service": service, "reason": reason}) or 0.0


FORGED = {
    # What the services trusted before: a tenant written in the metadata.
    "MISSING": (("x-memgrid-tenant", "victim"), ("x-memgrid-memory-limit", "1000000")),
    "BAD_SIGNATURE": (
        (CLAIM_METADATA_KEY, sign_claim(b"not-this-deployments-key-0123456789", "victim", "admin", audience=SERVICES)),
    ),
    "EXPIRED": (
        (
            CLAIM_METADATA_KEY,
            sign_claim(TEST_CLAIM_KEY.encode(), "victim", "admin", ttl=60, now=0.0, audience=SERVICES),
        ),
    ),
    "MALFORMED": ((CLAIM_METADATA_KEY, "victim"),),
}


@pytest.mark.parametrize("reason", list(FORGED))
async def test_every_service_refuses_a_call_without_a_valid_claim(stack, reason):
    for service, stub_class, method, request in CALLS:
        before = refused_count(service, reason)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await getattr(stub_class(stack[service]), method)(request(), metadata=FORGED[reason])
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED, (service, reason)
        assert error_info(refused.value).reason == f"CLAIM_{reason}"
        assert refused_count(service, reason) == before + 1
        # The same call with a claim is served.
        await getattr(stub_class(stack[service]), method)(request(), metadata=signed("acme"))


async def test_an_expired_claim_is_refused_once_its_lifetime_and_the_skew_are_past(stack, settings):
    ttl, skew = settings.plane.service_claim_ttl_seconds, settings.plane.service_claim_skew_seconds
    recall = recall_service_pb2_grpc.RecallServiceStub(stack["recall"])
    key, now = TEST_CLAIM_KEY.encode(), time.time()
    within = sign_claim(key, "acme", "read", ttl=ttl, now=now - ttl - skew + 3, audience="recall")
    await recall.GetGraphStats(recall_service_pb2.GetGraphStatsRequest(), metadata=((CLAIM_METADATA_KEY, within),))
    past = sign_claim(key, "acme", "read", ttl=ttl, now=now - ttl - skew - 1, audience="recall")
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await recall.GetGraphStats(recall_service_pb2.GetGraphStatsRequest(), metadata=((CLAIM_METADATA_KEY, past),))
    assert error_info(refused.value).reason == "CLAIM_EXPIRED"


async def test_the_tenant_and_the_quota_come_from_the_claim_alone(stack):
    ingest = ingest_service_pb2_grpc.IngestServiceStub(stack["ingest"])
    recall = recall_service_pb2_grpc.RecallServiceStub(stack["recall"])
    victims = (await ingest.CreateMemory(draft("the victim's secret"), metadata=signed("victim"))).memory.id
    forged = (*signed("intruder"), ("x-memgrid-tenant", "victim"))
    with pytest.raises(grpc.aio.AioRpcError) as hidden:
        await recall.GetMemory(recall_service_pb2.GetMemoryRequest(id=victims), metadata=forged)
    assert hidden.value.code() == grpc.StatusCode.NOT_FOUND
    # A write with the forged header lands in the claim's tenant.
    mine = (await ingest.CreateMemory(draft("the intruder's own"), metadata=forged)).memory.id
    await recall.GetMemory(recall_service_pb2.GetMemoryRequest(id=mine), metadata=signed("intruder"))
    # The memory limit signed in counts; a header cannot lift it.
    with pytest.raises(grpc.aio.AioRpcError) as full:
        await ingest.CreateMemory(
            draft("over the quota"), metadata=(*signed("victim", memory_limit=1), ("x-memgrid-memory-limit", "99"))
        )
    assert full.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_every_tenant_operations_need_the_operator_role(stack):
    recall = recall_service_pb2_grpc.RecallServiceStub(stack["recall"])
    consolidate = consolidate_service_pb2_grpc.ConsolidateServiceStub(stack["consolidate"])
    every = {
        "rebuild": lambda md: _drain(
            recall.RebuildIndex(recall_service_pb2.RebuildIndexRequest(every_tenant=True), metadata=md)
        ),
        "consolidate": lambda md: consolidate.RunConsolidation(
            consolidate_service_pb2.RunConsolidationRequest(mode="decay", every_tenant=True), metadata=md
        ),
    }
    for name, call in every.items():
        before = refused_count("recall" if name != "consolidate" else "consolidate", "ROLE")
        for role in ("read", "write", "review", "admin"):  # a tenant's admin is no operator
            tenant = "acme"
            with pytest.raises(grpc.aio.AioRpcError) as denied:
                await call(signed(tenant, role))
            assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED, (name, role)
            assert error_info(denied.value).reason == "ROLE_REQUIRED"
        assert refused_count("recall" if name != "consolidate" else "consolidate", "ROLE") == before + 4
        await call(signed("acme", "operator"))
    # The status on no tenant's behalf (every tenant's figures, which the gateway filters for /health) takes a
    # tenantless claim of any role; with a tenant, a non-operator's status is its own.
    await recall.GetSystemStatus(recall_service_pb2.GetSystemStatusRequest(), metadata=signed(None, "read"))
    await recall.GetSystemStatus(recall_service_pb2.GetSystemStatusRequest(), metadata=signed("acme", "read"))


async def _drain(stream) -> None:
    async for _ in stream:
        pass


async def test_health_and_reflection_need_no_claim(stack):
    for name, channel in stack.items():
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert reply.status == health_pb2.HealthCheckResponse.SERVING, name
        reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
        answers = [
            a
            async for a in reflection.ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")])
            )
        ]
        assert answers and answers[0].list_services_response.service, name


# TLS ---------------------------------------------------------------------------------------------------------


def self_signed(directory, name: str) -> tuple:
    """A self-signed certificate for localhost/127.0.0.1 (openssl), as (cert, key) paths."""
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", f"/CN={name}",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-addext", "basicConstraints=critical,CA:TRUE",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


async def test_tls_on_server_and_client_with_client_certificates(settings, tmp_path):
    cert, key = self_signed(tmp_path, "plane")
    # One certificate, its own CA: every process of the deployment holds it (mutual TLS).
    tls = settings.override({"grpc_tls_cert_file": cert, "grpc_tls_key_file": key, "grpc_tls_ca_file": cert})
    plane = ServicePlane.from_settings(tls.plane, tls.process.memgrid_data_dir)
    service = await start("ingest", build_ingest(tls), host="127.0.0.1", port=0, grace_seconds=1.0, plane=plane)
    target = f"127.0.0.1:{service.port}"
    try:
        async with plane.channel(target) as channel:
            reply = await ingest_service_pb2_grpc.IngestServiceStub(channel).CreateMemory(
                draft("over TLS"), metadata=signed("acme"), timeout=10
            )
            assert reply.memory.id
        # Plaintext is not served.
        async with grpc.aio.insecure_channel(target) as plain:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await health_pb2_grpc.HealthStub(plain).Check(health_pb2.HealthCheckRequest(), timeout=3)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        # TLS without a client certificate is refused: the CA makes it mutual.
        anonymous = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        async with grpc.aio.secure_channel(target, anonymous) as no_cert:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await health_pb2_grpc.HealthStub(no_cert).Check(health_pb2.HealthCheckRequest(), timeout=3)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        # A client trusting another CA does not reach it either.
        other_cert, other_key = self_signed(tmp_path, "other")
        stranger = ServicePlane(
            TEST_CLAIM_KEY.encode(), tls_cert_file=other_cert, tls_key_file=other_key, tls_ca_file=other_cert
        )
        async with stranger.channel(target) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=3)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        await service.stop()
