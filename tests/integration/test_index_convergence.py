"""The vector index converges on the graph (services/recall/convergence.py):
points deleted behind recall's back come back, points whose memory is gone
and a tenant the graph no longer has are dropped, and a shard lost or
corrupted while recall was stopped is rebuilt at start-up, after which the
vector arm answers again; GetSystemStatus reports the lag and the last check."""

from __future__ import annotations

import asyncio
import shutil
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memgrid.v1 import recall_service_pb2, recall_service_pb2_grpc
from services.core.adapters.edge_index import EdgeVectorIndex
from services.core.adapters.qdrant_index import QdrantClientIndex
from services.core.domain.model import EventKind, MemoryEvent
from services.core.domain.projection import vector_payload
from services.core.grpc.server import start
from services.recall.bootstrap import build_app
from services.recall.convergence import IndexConvergence
from services.recall.index_admin import IndexAdmin
from tests.conftest import plane_of, signed
from tests.factories import memory_at
from tests.integration import recall_parts

pytestmark = pytest.mark.integration

T0 = datetime(2025, 3, 1, tzinfo=UTC)


def uid(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


def axis(n: int, size: int) -> list[float]:
    vector = [0.01] * size
    vector[n % size] = 1.0
    return vector


async def write(graph, tenant: str, count: int, size: int) -> list:
    """Memories with embeddings in the graph only: the index does not hear of them."""
    memories = [memory_at(uid(f"{tenant}{n}"), T0, tenant=tenant, embedding=axis(n, size)) for n in range(count)]
    await graph.writer.create_memories(
        memories, [MemoryEvent.for_memory(EventKind.CREATED, m, T0) for m in memories], now_us=1
    )
    return memories


def convergence(graph, vectors) -> IndexConvergence:
    return convergence_and_admin(graph, vectors)[0]


def convergence_and_admin(graph, vectors) -> tuple[IndexConvergence, IndexAdmin]:
    admin = recall_parts.index_admin(graph, vectors)
    checker = IndexConvergence(
        source=graph.index_source,
        vectors=vectors,
        rebuild_tenant=lambda tenant: admin.project_anew(2, tenant),
        lock=admin.rebuild_lock,
        interval_seconds=0,
        settle_seconds=0,
        batch_size=2,
        max_tenants=100,
        rebuild_waiting=admin.rebuild_waiting,
    )
    admin.convergence_figures = checker.figures
    return checker, admin


def watch_upserts(vectors) -> list[tuple[int, bool]]:
    """Every upsert from now on, as (its points, whether it ran inside a bulk load)."""
    seen: list[tuple[int, bool]] = []
    depth = 0
    bulk_load, upsert = vectors.bulk_load, vectors.upsert

    @asynccontextmanager
    async def tracked() -> AsyncIterator[None]:
        nonlocal depth
        async with bulk_load():
            depth += 1
            try:
                yield
            finally:
                depth -= 1

    async def counted(points) -> None:
        seen.append((len(points), depth > 0))
        await upsert(points)

    vectors.bulk_load, vectors.upsert = tracked, counted
    return seen


@pytest.fixture(params=["edge", "qdrant-local"])
async def vectors(request, tmp_path):
    """Both engines: the check relies on each one's facet over `tenant`."""
    if request.param == "edge":
        index = EdgeVectorIndex(path=tmp_path / "vectors" / "m", collection="m", vector_size=4)
        index.open()
    else:
        index = QdrantClientIndex(collection="m", vector_size=4, location=":memory:")
        await index.open()
    yield index
    await index.close()


async def test_the_check_restores_missing_points_and_drops_stale_ones(graph, vectors):
    a = await write(graph, "a", 5, 4)
    b = await write(graph, "b", 3, 4)
    bare = memory_at(uid("a-bare"), T0, tenant="a")  # no vector yet: no point expected
    await graph.writer.create_memories([bare], [MemoryEvent.for_memory(EventKind.CREATED, bare, T0)], now_us=1)
    # a: two points lost; b: complete plus a point whose memory is gone; c: a tenant the graph does not have.
    await vectors.upsert([(m.id, m.embedding, vector_payload(m)) for m in a[:3]])
    await vectors.upsert([(m.id, m.embedding, vector_payload(m)) for m in b])
    await vectors.upsert([(uid("b-gone"), axis(0, 4), vector_payload(b[0]))])
    ghost = memory_at(uid("c0"), T0, tenant="c", embedding=axis(1, 4))
    await vectors.upsert([(ghost.id, ghost.embedding, vector_payload(ghost))])
    checker = convergence(graph, vectors)

    before = time.time()
    report = await checker.check()

    assert await vectors.count_by_tenant(100) == {"a": 5, "b": 3}
    assert (report.lag, report.repaired_tenants) == (0, 3)
    assert report.moved == 2 + 1 + 1 and report.checked_at >= before
    figures = checker.figures()
    assert figures["lag"] == 0 and figures["last_check"] >= before and figures["repaired_points"] == 4
    # A second check finds nothing to do.
    again = await checker.check()
    assert (again.lag, again.repaired_tenants, again.moved) == (0, 0, 0)


async def test_a_memory_of_another_dimension_is_not_a_missing_point(graph, vectors):
    await write(graph, "a", 2, 4)
    await write(graph, "a-wide", 2, 8)  # refused by a 4-dimensional index: never expected in it
    checker = convergence(graph, vectors)
    report = await checker.check()
    assert report.repaired_tenants == 2 and report.lag == 0  # a's points restored, a-wide's counted as refused
    assert await vectors.count_by_tenant(100) == {"a": 2}
    assert (await checker.check()).repaired_tenants == 0  # and not repaired at every check


async def test_a_repair_goes_in_as_one_bulk_load(graph, vectors):
    """A repair projects the whole tenant again: one HNSW build at the end, as
    a rebuild's, not an optimisation every VECTOR_OPTIMIZE_EVERY points."""
    await write(graph, "a", 7, 4)
    checker = convergence(graph, vectors)
    seen = watch_upserts(vectors)
    report = await checker.check()
    assert report.lag == 0 and await vectors.count_by_tenant(100) == {"a": 7}
    assert [n for n, _ in seen] == [2, 2, 2, 1] and all(inside for _, inside in seen)


async def test_a_repair_leaves_its_tenant_to_a_waiting_rebuild(graph, vectors):
    """A restore writes the graph, then asks for a rebuild; the check may
    have started repairing the same tenant first. The repair stops at its
    next page and the rebuild projects the tenant once (1 + 10 pages of a,
    not 10 + 10); the check's repair of another tenant goes on (2 of b)."""
    await write(graph, "a", 20, 4)
    await write(graph, "b", 4, 4)
    checker, admin = convergence_and_admin(graph, vectors)
    seen = watch_upserts(vectors)
    rebuilds: list[asyncio.Task] = []

    async def drain(tenant: str | None) -> int:
        return len([p async for p in admin.rebuild_index(2, tenant)])

    upsert = vectors.upsert

    async def first_page_asks_for_a_rebuild(points) -> None:
        if not rebuilds:  # the repair's first page of a: a rebuild of a asks while it runs
            rebuilds.append(asyncio.create_task(drain("a")))
            await asyncio.sleep(0)  # it now waits for the lock the check holds
            assert admin.rebuild_waiting("a") and not admin.rebuild_waiting("b")
        await upsert(points)

    vectors.upsert = first_page_asks_for_a_rebuild
    report = await checker.check()
    assert report.repaired_tenants == 2 and report.lag == 18  # a: 2 of 20 points, left to the rebuild
    assert len(seen) == 1 + 2
    await asyncio.gather(*rebuilds)
    assert not admin.rebuild_waiting("a") and not admin._waiting  # no count left behind at zero
    assert await vectors.count_by_tenant(100) == {"a": 20, "b": 4}
    assert len(seen) == 1 + 2 + 10
    assert (await checker.check()).repaired_tenants == 0


# The recall service: start-up rebuilds a lost or corrupt shard, the periodic check a deleted point.


async def _similar(channel, tenant: str, vector: list[float]) -> list[str]:
    stub = recall_service_pb2_grpc.RecallServiceStub(channel)
    reply = await stub.FindSimilar(
        recall_service_pb2.FindSimilarRequest(
            queries=[recall_service_pb2.FindSimilarRequest.Query(embedding=vector)], limit=50
        ),
        metadata=signed(tenant),
    )
    return [m.id for m in reply.results[0].memories]


async def _figures(channel) -> dict[str, float]:
    stub = recall_service_pb2_grpc.RecallServiceStub(channel)
    status = await stub.GetSystemStatus(recall_service_pb2.GetSystemStatusRequest(), metadata=signed(None, "operator"))
    [index] = [c for c in status.components if c.name == "vector_index"]
    return dict(index.figures)


async def _until(predicate, seconds: float = 30.0):
    deadline = time.monotonic() + seconds
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.1)


async def _run_recall(settings, vectors=None):
    service = await start(
        "recall", build_app(settings, vectors=vectors), host="127.0.0.1", port=0, grace_seconds=1.0,
        plane=plane_of(settings),
    )  # fmt: skip
    return service, grpc.aio.insecure_channel(f"127.0.0.1:{service.port}")


def _corrupt(shard: Path) -> None:
    """Garbage over the WAL's header: qdrant-edge can no longer load the shard."""
    [wal] = sorted((shard / "wal").glob("open-*"))[:1]
    with wal.open("r+b") as f:
        f.write(b"\x00not a wal segment" * 8)


@pytest.mark.parametrize("damage", ["deleted", "corrupt"])
async def test_recall_rebuilds_a_lost_or_corrupt_shard_at_start_up(settings, graph, damage):
    settings = settings.override({"recall_index_check_seconds": 0.3, "recall_index_check_settle_seconds": 0})
    size = settings.vectors.vector_size
    memories = await write(graph, "acme", 6, size)
    service, channel = await _run_recall(settings)
    try:
        # The first check, at start-up, projects what the events never brought.
        assert set(await _until(lambda: _similar(channel, "acme", axis(0, size)))) == {m.id for m in memories}
    finally:
        await channel.close()
        await service.stop()

    shard = settings.process.memgrid_data_dir / "vectors" / settings.vectors.qdrant_collection
    if damage == "deleted":
        shutil.rmtree(shard)
    else:
        _corrupt(shard)

    started = time.time()
    service, channel = await _run_recall(settings)
    try:

        async def converged():
            figures = await _figures(channel)
            return figures if figures["last_check"] >= started and figures["points"] == 6 else None

        figures = await _until(converged)
        assert figures["lag"] == 0 and figures["repaired_points"] == 6
        assert set(await _similar(channel, "acme", axis(0, size))) == {m.id for m in memories}
        # Ready (the readiness probe's service name) once the start-up check refilled the index.
        health = health_pb2_grpc.HealthStub(channel)
        named = await health.Check(health_pb2.HealthCheckRequest(service=service.app.service_name))
        assert named.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        await channel.close()
        await service.stop()


async def test_the_periodic_check_restores_points_deleted_behind_recalls_back(settings, graph):
    settings = settings.override({"recall_index_check_seconds": 0.3, "recall_index_check_settle_seconds": 0})
    size = settings.vectors.vector_size
    memories = await write(graph, "acme", 4, size)
    vectors = EdgeVectorIndex(
        path=settings.process.memgrid_data_dir / "vectors" / "m", collection="m", vector_size=size, quantization="none"
    )
    service, channel = await _run_recall(settings, vectors)
    try:
        await _until(lambda: _similar(channel, "acme", axis(0, size)))
        await vectors.delete([memories[0].id, memories[1].id], tenant="acme")
        deleted_at = time.time()
        assert await vectors.count() == 2

        async def restored():
            figures = await _figures(channel)
            return figures if figures["last_check"] > deleted_at and figures["points"] == 4 else None

        figures = await _until(restored)
        assert figures["lag"] == 0
        assert set(await _similar(channel, "acme", axis(0, size))) == {m.id for m in memories}
    finally:
        await channel.close()
        await service.stop()
