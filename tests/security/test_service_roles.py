"""Roles hold behind the gateway too. Played as a caller on the plaintext
service plane holding a claim the deployment signed: a `read` claim, a
writer's, a tenant admin's, one minted for another service. Each service
checks the role every method needs from one table
(services/core/grpc/method_roles.py), and a claim names the service it is
for; the table is walked against every RPC the generated descriptors hold."""

from __future__ import annotations

import importlib
import pkgutil
import uuid

import grpc
import pytest

import memgrid.v1
from gateway.clients import ClaimFor, ServiceClients
from memgrid.v1 import (
    audit_service_pb2,
    audit_service_pb2_grpc,
    consolidate_service_pb2,
    consolidate_service_pb2_grpc,
    ingest_service_pb2,
    ingest_service_pb2_grpc,
    memory_pb2,
    recall_service_pb2,
    recall_service_pb2_grpc,
)
from services.consolidate.bootstrap import build_app as build_consolidate
from services.core.grpc.claims import ROLES, verify_claim
from services.core.grpc.errors import error_info
from services.core.grpc.method_roles import EVERY_TENANT, FORCE, METHOD_RULES, UNSIGNED
from services.core.grpc.plane import ClaimInterceptor
from services.core.grpc.server import ErrorAndMetricsInterceptor, start
from services.core.settings import SERVICE_NAMES
from services.ingest.bootstrap import build_app as build_ingest
from services.recall.bootstrap import build_app as build_recall
from tests.conftest import TEST_CLAIM_KEY, plane_of, signed

pytestmark = pytest.mark.integration


def generated_methods() -> dict[str, object]:
    """Every RPC of every service the generated code declares, by full gRPC name: its descriptor."""
    methods = {}
    for module_info in pkgutil.iter_modules(memgrid.v1.__path__):
        if not module_info.name.endswith("_pb2"):
            continue
        module = importlib.import_module(f"memgrid.v1.{module_info.name}")
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                methods[f"/{service.full_name}/{method.name}"] = method
    return methods


def test_every_rpc_of_every_service_has_a_role_in_the_table_and_nothing_else_does():
    methods = generated_methods()
    assert len(methods) >= 40  # the walk found the services (ingest, recall, audit, enrich, consolidate)
    missing = sorted(set(methods) - set(METHOD_RULES))
    assert not missing, f"RPCs with no role in services/core/grpc/method_roles.py: {missing}"
    assert not set(METHOD_RULES) - set(methods), "the table names methods no service has"
    for name, rule in METHOD_RULES.items():
        assert rule.role in ROLES, name
        fields = methods[name].input_type.fields_by_name
        for field, role in rule.raised_by:
            assert field in fields and role in ROLES, (name, field)
        # Every request that can ask for every tenant, or force past a tombstone, is raised by it.
        if "every_tenant" in fields:
            assert set(EVERY_TENANT) <= set(rule.raised_by), f"{name}: every_tenant without the operator role"
        if "force" in fields:
            assert set(FORCE) <= set(rule.raised_by), f"{name}: force without the review role"
        if "allow_unsigned" in fields:
            assert set(UNSIGNED) <= set(rule.raised_by), f"{name}: allow_unsigned without the operator role"


@pytest.fixture
async def plane_stack(settings):
    """ingest, recall and consolidate on free ports, with the tests' key; yields {name: channel}
    (and, under "targets", {name: host:port})."""
    builders = {"ingest": build_ingest, "recall": build_recall, "consolidate": build_consolidate}
    running, channels, targets = [], {}, {}
    try:
        for name, build in builders.items():
            service = await start(
                name, build(settings), host="127.0.0.1", port=0, grace_seconds=1.0, plane=plane_of(settings)
            )
            running.append(service)
            targets[name] = f"127.0.0.1:{service.port}"
            channels[name] = grpc.aio.insecure_channel(targets[name])
        yield {**channels, "targets": targets}
    finally:
        for channel in channels.values():
            await channel.close()
        for service in running:
            await service.stop()


def draft(content: str, **fields) -> ingest_service_pb2.CreateMemoryRequest:
    return ingest_service_pb2.CreateMemoryRequest(memory=memory_pb2.MemoryDraft(content=content), **fields)


async def refused(call) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


async def drained(stream) -> None:
    async for _ in stream:
        pass


async def test_a_read_claim_cannot_change_anything_by_calling_ingest_directly(plane_stack):
    ingest = ingest_service_pb2_grpc.IngestServiceStub(plane_stack["ingest"])
    recall = recall_service_pb2_grpc.RecallServiceStub(plane_stack["recall"])
    tenant = f"victim-{uuid.uuid4().hex[:8]}"
    kept = (await ingest.CreateMemory(draft("the victim's decision"), metadata=signed(tenant, "write"))).memory.id
    reader = signed(tenant, "read")
    writes = {
        "DeleteMemory": ingest.DeleteMemory(ingest_service_pb2.DeleteMemoryRequest(id=kept), metadata=reader),
        "CreateMemory": ingest.CreateMemory(draft("a reader's write"), metadata=reader),
        "DeleteMemoriesByTag": ingest.DeleteMemoriesByTag(
            ingest_service_pb2.DeleteMemoriesByTagRequest(tags=["any"]), metadata=reader
        ),
        "SupersedeMemory": ingest.SupersedeMemory(
            ingest_service_pb2.SupersedeMemoryRequest(
                old_memory_id=kept, replacement=memory_pb2.MemoryDraft(content="a reader's replacement")
            ),
            metadata=reader,
        ),
    }
    for name, call in writes.items():
        error = await refused(call)
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED, name
        assert error_info(error).reason == "ROLE_REQUIRED" and "'write'" in error.details(), name
    # Nothing changed: the memory is there for its tenant, and the reader still reads.
    got = await recall.GetMemory(recall_service_pb2.GetMemoryRequest(id=kept), metadata=reader)
    assert got.memory.content == "the victim's decision"


async def test_each_method_needs_its_role_and_every_tenant_an_operator(plane_stack):
    ingest = ingest_service_pb2_grpc.IngestServiceStub(plane_stack["ingest"])
    recall = recall_service_pb2_grpc.RecallServiceStub(plane_stack["recall"])
    audit = audit_service_pb2_grpc.AuditServiceStub(plane_stack["recall"])
    consolidate = consolidate_service_pb2_grpc.ConsolidateServiceStub(plane_stack["consolidate"])
    tenant = f"alpha-{uuid.uuid4().hex[:8]}"
    writer, admin = signed(tenant, "write"), signed(tenant, "admin")
    needs_more = {
        # A writer's claim: review and admin methods.
        "ReviewMemory": ingest.ReviewMemory(
            ingest_service_pb2.ReviewMemoryRequest(id="x", approve=True), metadata=writer
        ),
        "RemoveTombstone": ingest.RemoveTombstone(ingest_service_pb2.RemoveTombstoneRequest(id="x"), metadata=writer),
        "ListTombstones": recall.ListTombstones(recall_service_pb2.ListTombstonesRequest(), metadata=writer),
        "VerifyAudit": audit.VerifyAudit(audit_service_pb2.VerifyAuditRequest(), metadata=writer),
        "ListBackups": consolidate.ListBackups(consolidate_service_pb2.ListBackupsRequest(), metadata=writer),
        # A tenant admin's claim: everything over every tenant.
        "RunConsolidation(every_tenant)": consolidate.RunConsolidation(
            consolidate_service_pb2.RunConsolidationRequest(mode="decay", every_tenant=True), metadata=admin
        ),
        "CreateBackup(every_tenant)": consolidate.CreateBackup(
            consolidate_service_pb2.CreateBackupRequest(every_tenant=True), metadata=admin
        ),
        "RestoreBackup(every_tenant)": drained(
            consolidate.RestoreBackup(
                consolidate_service_pb2.RestoreBackupRequest(name="x.jsonl.gz", every_tenant=True), metadata=admin
            )
        ),
        "RestoreBackup(allow_unsigned)": drained(
            consolidate.RestoreBackup(
                consolidate_service_pb2.RestoreBackupRequest(name="x.jsonl.gz", allow_unsigned=True), metadata=admin
            )
        ),
        "RebuildIndex(every_tenant)": drained(
            recall.RebuildIndex(recall_service_pb2.RebuildIndexRequest(every_tenant=True), metadata=admin)
        ),
        "ListTombstones(no tenant)": recall.ListTombstones(
            recall_service_pb2.ListTombstonesRequest(), metadata=signed(None, "admin")
        ),
    }
    for name, call in needs_more.items():
        error = await refused(call)
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED, (name, error.code(), error.details())
        assert error_info(error).reason == "ROLE_REQUIRED", name
    every = await refused(
        consolidate.RunConsolidation(
            consolidate_service_pb2.RunConsolidationRequest(mode="decay", every_tenant=True), metadata=admin
        )
    )
    assert "'every_tenant' needs the 'operator' role" in every.details()
    # An operator's claim may; a tenant's admin keeps its own tenant's administration.
    operator = signed(None, "operator")
    await consolidate.RunConsolidation(
        consolidate_service_pb2.RunConsolidationRequest(mode="decay", every_tenant=True), metadata=operator
    )
    await recall.GetSystemStatus(recall_service_pb2.GetSystemStatusRequest(), metadata=operator)
    await recall.ListTombstones(recall_service_pb2.ListTombstonesRequest(), metadata=admin)
    await audit.VerifyAudit(audit_service_pb2.VerifyAuditRequest(), metadata=admin)


async def test_the_claim_for_an_anonymous_health_check_is_good_for_the_status_alone(plane_stack):
    """The gateway answers /health to anyone with the every-tenant status (filtered), so it signs recall a claim
    on no tenant's behalf for it: a read claim, which captured, reaches nothing else."""
    recall = recall_service_pb2_grpc.RecallServiceStub(plane_stack["recall"])
    consolidate = consolidate_service_pb2_grpc.ConsolidateServiceStub(plane_stack["consolidate"])
    anonymous = signed(None, "read", audience="recall")
    status = await recall.GetSystemStatus(recall_service_pb2.GetSystemStatusRequest(), metadata=anonymous)
    assert status.components
    for name, call in {
        "RebuildIndex(every_tenant)": drained(
            recall.RebuildIndex(recall_service_pb2.RebuildIndexRequest(every_tenant=True), metadata=anonymous)
        ),
        "ExportMemories": recall.ExportMemories(recall_service_pb2.ExportMemoriesRequest(), metadata=anonymous),
        "WatchMemoryEvents": drained(
            recall.WatchMemoryEvents(recall_service_pb2.WatchMemoryEventsRequest(), metadata=anonymous)
        ),
        "ListBackups (another service)": consolidate.ListBackups(
            consolidate_service_pb2.ListBackupsRequest(), metadata=anonymous
        ),
    }.items():
        error = await refused(call)
        assert error.code() in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED), name


async def test_force_past_a_tombstone_needs_the_review_role(plane_stack):
    ingest = ingest_service_pb2_grpc.IngestServiceStub(plane_stack["ingest"])
    tenant = f"alpha-{uuid.uuid4().hex[:8]}"
    content = f"store the session tokens in localStorage {uuid.uuid4().hex}"
    memory = (await ingest.CreateMemory(draft(content), metadata=signed(tenant, "write"))).memory.id
    await ingest.DeleteMemory(
        ingest_service_pb2.DeleteMemoryRequest(id=memory, reason="rejected"), metadata=signed(tenant, "write")
    )
    for name, call in {
        "CreateMemory": ingest.CreateMemory(draft(content, force=True), metadata=signed(tenant, "write")),
        "BatchCreateMemories": ingest.BatchCreateMemories(
            ingest_service_pb2.BatchCreateMemoriesRequest(
                memories=[memory_pb2.MemoryDraft(content=content)], force=True
            ),
            metadata=signed(tenant, "write"),
        ),
    }.items():
        error = await refused(call)
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED, name
        assert "'force' needs the 'review' role" in error.details(), name
    # Unforced, the writer meets the tombstone; the reviewer's force stores it.
    tombstoned = await refused(ingest.CreateMemory(draft(content), metadata=signed(tenant, "write")))
    assert tombstoned.code() == grpc.StatusCode.ALREADY_EXISTS
    forced = await ingest.CreateMemory(draft(content, force=True), metadata=signed(tenant, "review"))
    assert forced.memory.content == content


async def test_a_claim_minted_for_recall_is_refused_by_ingest(plane_stack, settings):
    ingest = ingest_service_pb2_grpc.IngestServiceStub(plane_stack["ingest"])
    recall = recall_service_pb2_grpc.RecallServiceStub(plane_stack["recall"])
    tenant = f"alpha-{uuid.uuid4().hex[:8]}"
    for_recall = signed(tenant, "admin", audience="recall")
    await recall.GetGraphStats(recall_service_pb2.GetGraphStatsRequest(), metadata=for_recall)
    error = await refused(ingest.CreateMemory(draft("replayed on ingest"), metadata=for_recall))
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert error_info(error).reason == "CLAIM_WRONG_AUDIENCE"

    # The gateway's clients sign each call for the service it goes to: what they send recall, ingest refuses.
    targets = {name: "127.0.0.1:1" for name in SERVICE_NAMES}
    targets.update(plane_stack["targets"])
    gateway = ServiceClients.connect(targets, plane_of(settings))
    try:
        captured = gateway.signer("recall").metadata(tenant, "admin", actor="alpha-admin")
        assert verify_claim(TEST_CLAIM_KEY.encode(), captured[0][1], audience="recall").audience == ("recall",)
        error = await refused(ingest.DeleteMemory(ingest_service_pb2.DeleteMemoryRequest(id="x"), metadata=captured))
        assert error_info(error).reason == "CLAIM_WRONG_AUDIENCE"
        made = await gateway.ingest.CreateMemory(
            draft("through the gateway's stub"), metadata=ClaimFor(tenant, "write")
        )
        assert made.memory.content == "through the gateway's stub"
    finally:
        await gateway.close()


async def test_a_method_missing_from_the_table_is_refused_never_served(settings):
    async def answer(request, context):
        return b"served"

    server = grpc.aio.server(
        interceptors=[ErrorAndMetricsInterceptor("ingest"), ClaimInterceptor("ingest", plane_of(settings))]
    )
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "memgrid.v1.IngestService", {"Unlisted": grpc.unary_unary_rpc_method_handler(answer)}
            ),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary("/memgrid.v1.IngestService/Unlisted")
            error = await refused(call(b"", metadata=signed(None, "operator")))
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "no role in the method table" in error.details()
    finally:
        await server.stop(0)
