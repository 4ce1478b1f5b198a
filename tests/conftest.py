"""Shared fixtures: real FalkorDB and NATS servers on free ports, per session.

Each test gets its own graph, stream and subject prefix, so tests sharing the
servers never see each other's data.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from devstack.servers import NatsCluster, ServerProcess, free_port, start_falkordb, start_nats, start_nats_cluster
from services.core.grpc.claims import claim_metadata
from services.core.grpc.plane import ServicePlane
from services.core.settings import SERVICE_NAMES, Settings

#: The service plane's claim key of every test stack (services/core/grpc/claims.py).
TEST_CLAIM_KEY = "memgrid-tests-service-claim-key-0123456789"
#: The key every test stack signs its backup archives with (services/consolidate/backup_key.py).
TEST_BACKUP_KEY = "memgrid-tests-backup-signing-key-0123456789"


def signed(
    tenant: str | None,
    role: str = "write",
    memory_limit: int | None = None,
    actor: str | None = None,
    *,
    audience: str | tuple[str, ...] = SERVICE_NAMES,
) -> tuple[tuple[str, str], ...]:
    """Call metadata for a direct gRPC call to a test stack's service: a claim
    for `tenant` signed with the tests' key (None: no tenant, for an operator's
    every-tenant call), for `audience` (by default every service: the gateway
    and the services sign one service's claim per call)."""
    return claim_metadata(TEST_CLAIM_KEY.encode(), tenant, role, memory_limit, actor, audience=audience)


def plane_of(settings: Settings) -> ServicePlane:
    """The service plane a test starts a service with (start(..., plane=))."""
    return ServicePlane.from_settings(settings.plane, settings.process.memgrid_data_dir)


@pytest.fixture(scope="session")
def falkordb_server(tmp_path_factory) -> Iterator[ServerProcess]:
    timeout = Settings(_env_file=None).graph.falkordb_query_timeout_ms  # as the devstack loads it
    server = start_falkordb(free_port(), tmp_path_factory.mktemp("falkordb"), query_timeout_ms=timeout)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory) -> Iterator[ServerProcess]:
    server = start_nats(free_port(), tmp_path_factory.mktemp("nats"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def nats_cluster(tmp_path_factory) -> Iterator[NatsCluster]:
    """A 3-node JetStream cluster on loopback, JetStream up on every node; per
    module, since a test may kill and restart its nodes (start_node)."""
    cluster = start_nats_cluster(tmp_path_factory.mktemp("nats-cluster"))
    yield cluster
    cluster.stop()


def make_settings(falkordb_port: int, nats_port: int, data_dir, **overrides) -> Settings:
    """Settings isolated to one test: its own graph, stream, subjects and ports."""
    unique = uuid.uuid4().hex[:10]
    values = dict(
        memgrid_data_dir=data_dir,
        falkordb_port=falkordb_port,
        falkordb_graph=f"test_{unique}",
        nats_url=f"nats://127.0.0.1:{nats_port}",
        nats_stream=f"EVENTS_{unique}",
        nats_subject_prefix=f"t{unique}.events",
        dependency_wait_seconds=20.0,
        shutdown_grace_seconds=1.0,
        log_json=False,
        # Fast stand-ins unless a test asks for the real models.
        embedding_provider="placeholder",
        enrichment_spacy_blank=True,
        enrichment_entity_process=False,
        consumer_fetch_timeout_seconds=0.2,
        # JetStream reserves a stream's max bytes on its server: the session's one server holds hundreds of
        # test streams, which the default's 2 GiB each would exhaust. Age still bounds them.
        nats_stream_max_bytes=0,
        # No consolidation on a schedule (it would rescore memories under other tests); tests run it on demand.
        consolidation_tick_seconds=0,
        service_claim_key=TEST_CLAIM_KEY,
        # One backup key for every test stack: an archive of one restores, signed, into another.
        backup_signing_key=TEST_BACKUP_KEY,
    )
    values.update(overrides)
    return Settings(_env_file=None, **values)


@pytest.fixture
def settings(falkordb_server, nats_server, tmp_path) -> Settings:
    return make_settings(falkordb_server.port, nats_server.port, tmp_path / "data")
