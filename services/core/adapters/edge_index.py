"""EdgeVectorIndex: Qdrant's engine in-process (qdrant-edge-py), the
embedded default for recall's vector projection.

One process owns the shard: open() takes an exclusive lock file beside it
(<collection>.lock, held until close: edge_shard_lock.py), so a second process on the same
directory refuses to start with VectorIndexInUse instead of failing deep in
qdrant-edge's WAL. Calls run in a worker thread so the event loop
never blocks; HNSW optimisation runs in the background after enough upserts
(searches keep working meanwhile, on the unoptimised segments). A write
flushes the shard when flush_seconds have passed since the last flush:
qdrant-edge, unlike Qdrant's server (every 5 s), never flushes by itself,
and an unflushed shard keeps every change since it opened in RAM and in a
WAL it can never truncate (part of recall's RSS climb in `make soak`, and
a start-up that replays all of it).
`clear()` drops the shard directory and creates it anew, and so does open()
when the shard on disk cannot be loaded (recall's convergence check then
re-projects it from the graph).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import structlog
from qdrant_edge import (
    CountRequest,
    Distance,
    EdgeConfig,
    EdgeShard,
    EdgeVectorParams,
    FacetRequest,
    Filter,
    PayloadSchemaType,
    Point,
    UpdateOperation,
)

from services.core.adapters.edge_filter import to_edge
from services.core.adapters.edge_resident import ResidentFiles
from services.core.adapters.edge_schema import (
    INDEXED_FIELDS,
    NARROWING_FIELDS,
    PAYLOAD_LINKS,
    QUANTIZATIONS,
    field_schema,
    unlinked,
)
from services.core.adapters.edge_search import SearchPlan
from services.core.adapters.edge_shard_lock import ShardLock
from services.core.adapters.vector_status import vector_index_status
from services.core.domain import vector_filter as vf
from services.core.domain.model import ComponentStatus
from services.core.domain.projection import VectorHit, VectorQuery, point_id

log = structlog.get_logger()


def _hit(point, with_payload: bool) -> VectorHit:
    """A hit, named by the memory id its payload carries (the point id is derived: projection.point_id)."""
    payload = dict(point.payload or {})
    return VectorHit(str(payload.get("memory_id") or point.id), float(point.score), payload if with_payload else None)


class EdgeVectorIndex:
    """A shard under <data_dir>/vectors/<collection>."""

    def __init__(
        self,
        *,
        path: Path,
        collection: str,
        vector_size: int,
        autodetect: bool = True,
        optimize_every: int = 5000,
        quantization: str = "int8",
        flush_seconds: float = 5.0,
        reopen_every: int = 0,
        payload_links: str = "window",
        acorn: bool = True,
        resident_mb: int = 0,
        oversampling: float | None = None,
        exact_below: int = 0,
    ):
        self._path = path
        self._collection = collection
        self.dimension = vector_size
        self._autodetect = autodetect
        self._manifest = path.parent / f"{collection}.index.json"
        #: (configured, found) when an existing index has another dimension and autodetect is off.
        self.mismatch: tuple[int, int] | None = None
        self.refused = 0
        #: Why open() replaced an unreadable shard with an empty one (None: it did not).
        self.recovered: str | None = None
        self._shard: EdgeShard | None = None
        self._lock = threading.Lock()
        #: Held by optimize() (which runs without _lock) and by clear(), which replaces the shard.
        self._optimize_guard = threading.Lock()
        self._optimize_every = optimize_every
        if quantization not in QUANTIZATIONS:
            raise ValueError(f"quantization must be one of {sorted(QUANTIZATIONS)}, got {quantization!r}")
        self._quantization = quantization
        if payload_links not in PAYLOAD_LINKS:
            raise ValueError(f"payload_links must be one of {sorted(PAYLOAD_LINKS)}, got {payload_links!r}")
        self._payload_links = payload_links
        #: VECTOR_SEARCH_ACORN: filtered searches use Qdrant's ACORN (a filtered
        #: search also explores its neighbours' neighbours, so it stays connected
        #: without payload links; Qdrant applies it to filters below 40 % of the
        #: points), on a shard made without links for a field a search narrows
        #: to (on one with them it would only cost): decided at every open.
        self._acorn = acorn
        #: VECTOR_OVERSAMPLING and VECTOR_EXACT_BELOW (edge_search.SearchPlan), with ACORN decided at every open.
        self._oversampling = oversampling
        self._exact_below = exact_below
        self._plan = SearchPlan(oversampling=oversampling, exact_below=exact_below)
        self._since_optimize = 0
        self._optimizing: asyncio.Task | None = None
        #: Bulk loads under way (bulk_load): upserts start no optimisation meanwhile.
        self._bulk = 0
        self._flush_seconds = flush_seconds
        self._flushed_at = time.monotonic()
        #: Flushes done (a figure for the tests).
        self.flushes = 0
        self._reopen_every = reopen_every
        self._since_reopen = 0
        #: Reopens done (reopen_every), a figure for the tests.
        self.reopens = 0
        self._shard_lock = ShardLock(path.parent / f"{collection}.lock", path)
        #: VECTOR_RESIDENT_MB: the shard's mapped files locked in memory (edge_resident.py).
        self.resident = ResidentFiles(path, resident_mb << 20)

    def open(self) -> None:
        """Load the shard when it exists, else create it with its payload indexes.

        An existing index keeps its dimension: with autodetect it is adopted;
        without, the index stays closed and the mismatch is reported (vectors
        are never truncated or padded to fit)."""
        if self._shard is not None:
            return
        self._shard_lock.take()
        try:
            self._open_locked()
        except BaseException:
            self._shard_lock.release()
            raise
        self._flushed_at = time.monotonic()  # the flush clock starts with the open shard, not the object
        self.resident.refresh_soon()

    def _open_locked(self) -> None:
        shutil.rmtree(self._cleared, ignore_errors=True)
        self._path.mkdir(parents=True, exist_ok=True)
        existing = any(self._path.iterdir())
        found = self._manifest_dimension() if existing else None
        if found is not None and found != self.dimension:
            if not self._autodetect:
                self.mismatch = (self.dimension, found)
                log.error("vector index dimension mismatch", configured=self.dimension, index=found)
                return
            log.info("adopting the vector index's dimension", configured=self.dimension, index=found)
            self.dimension = found
        if existing:
            try:
                shard = EdgeShard.load(str(self._path), self._config())
                self._shard = shard
            except Exception as exc:
                # A corrupt shard (a torn WAL, a damaged segment or config):
                # the index is a projection, so it is replaced by an empty one
                # and recall's convergence check re-projects it from the graph,
                # rather than recall failing at every start.
                log.error("vector index unreadable: replaced by an empty one", path=str(self._path), error=str(exc))
                self.recovered = str(exc)
                shutil.rmtree(self._cleared, ignore_errors=True)
                self._path.rename(self._cleared)
                shutil.rmtree(self._cleared, ignore_errors=True)
                self._path.mkdir(parents=True)
                existing = False
            else:
                # A shard made before a field was indexed gets its index now (filters work without, but scan).
                schema = shard.info().payload_schema
                for name, kind in INDEXED_FIELDS.items():
                    if name not in schema:
                        shard.update(UpdateOperation.create_field_index(name, self._schema(name, kind)))
        if not existing:
            self._shard = self._create()
        if self._shard is not None:
            self._plan = self._searching(self._shard)
        self._manifest.write_text(json.dumps({"dimension": self.dimension, "distance": "cosine"}))

    def _searching(self, shard: EdgeShard) -> SearchPlan:
        """How this shard searches: ACORN when it is wanted and the shard lacks
        links for a field a search narrows to (the links it was made with)."""
        acorn = self._acorn and bool(unlinked(shard.info().payload_schema) & set(NARROWING_FIELDS))
        return SearchPlan(acorn=acorn, oversampling=self._oversampling, exact_below=self._exact_below)

    @property
    def searches_with_acorn(self) -> bool:
        """Whether this shard's filtered searches use ACORN (a figure for status and the tests)."""
        return self._plan.acorn

    def _manifest_dimension(self) -> int | None:
        """The dimension the manifest records; None when it is missing or unreadable."""
        try:
            return int(json.loads(self._manifest.read_text())["dimension"])
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("vector index manifest unreadable", path=str(self._manifest), error=str(exc))
            return None

    @property
    def _cleared(self) -> Path:
        """Where clear() moves the old shard before deleting it."""
        return self._path.with_name(self._path.name + ".cleared")

    def _config(self) -> EdgeConfig:
        """The shard's configuration; on load it also applies to what the next
        optimisation builds (a shard made without quantisation gets it then)."""
        return EdgeConfig(
            vectors=EdgeVectorParams(size=self.dimension, distance=Distance.Cosine),
            quantization_config=QUANTIZATIONS[self._quantization],
        )

    def _create(self) -> EdgeShard:
        shard = EdgeShard.create(str(self._path), self._config())
        for name, kind in INDEXED_FIELDS.items():
            shard.update(UpdateOperation.create_field_index(name, self._schema(name, kind)))
        return shard

    def _schema(self, name: str, kind: PayloadSchemaType):
        """A field's index schema under VECTOR_PAYLOAD_LINKS. It is fixed when the
        field's index is made (a new shard: clear(), a rebuild, an unreadable
        shard); an existing shard keeps the links it was made with."""
        return field_schema(name, kind, self._payload_links)

    async def _run(self, fn):
        # Checked under the lock only: a reopen empties the shard for a moment, under the
        # lock, and a call meanwhile waits for it (a check before the lock failed it: the
        # soak's "internal error in SearchMemories").
        def locked():
            with self._lock:
                if self._shard is None:
                    raise RuntimeError("the vector index is not open")
                return fn(self._shard)

        return await asyncio.to_thread(locked)

    async def upsert(self, points: list[tuple[str, list[float], dict]]) -> None:
        if not points:
            return
        for _, vector, _ in points:
            if len(vector) != self.dimension:
                self.refused += 1
                raise ValueError(f"vector has {len(vector)} dimensions; the index holds {self.dimension}")
        batch = [
            Point(uuid.UUID(point_id(payload.get("tenant", ""), i)), vector, {**payload, "memory_id": i})
            for i, vector, payload in points
        ]
        await self._run(lambda shard: shard.update(UpdateOperation.upsert_points(batch)))
        self._since_optimize += len(points)
        if self._since_optimize >= self._optimize_every and self._optimizing is None and not self._bulk:
            self._since_optimize = 0
            self._optimizing = asyncio.create_task(self._optimize())
        await self._flush_when_due()
        await self._reopen_when_due(len(points))

    async def _flush_when_due(self) -> None:
        """Flush the shard after a write when flush_seconds have passed since
        the last flush (VECTOR_FLUSH_SECONDS): the changes go to the segments
        and the WAL the shard no longer needs is truncated. The write is in
        the WAL already, so a failed flush is logged, not raised."""
        if time.monotonic() - self._flushed_at < self._flush_seconds:
            return
        self._flushed_at = time.monotonic()
        try:
            await self._run(lambda shard: shard.flush())
            self.flushes += 1
        except Exception as exc:
            log.warning("vector index flush failed", error=str(exc))

    async def _reopen_when_due(self, changes: int) -> None:
        """Close the shard and load it again once reopen_every changes have
        gone in since the last time (not during a bulk load, which ends in
        an optimisation): an open shard keeps native memory for every change
        it has seen, about 0.5-1 KiB each, which neither a flush nor an
        optimisation gives back and closing does (docs/performance.md)."""
        self._since_reopen += changes
        if not self._reopen_every or self._since_reopen < self._reopen_every or self._bulk or self._optimizing:
            return  # an optimisation under way: the next change reopens
        self._since_reopen = 0
        started = time.perf_counter()

        def reopen() -> None:
            with self._lock, self._optimize_guard:
                old, self._shard = self._shard, None
                if old is not None:
                    old.flush()
                    old.close()
                self._open_locked()  # an unreadable shard is replaced by an empty one, as at start-up

        await asyncio.to_thread(reopen)
        self.reopens += 1
        self.resident.refresh_soon()
        self._flushed_at = time.monotonic()
        log.info("vector index reopened", seconds=round(time.perf_counter() - started, 2))

    @asynccontextmanager
    async def bulk_load(self) -> AsyncIterator[None]:
        """A rebuild's upserts: no optimisation starts while they go in, and
        when they were optimize_every or more, one optimisation at the end
        builds the HNSW graph once over them all (Qdrant's bulk-upload
        advice); fewer are left to the periodic one, as any write's are.
        Optimising every optimize_every points instead merges ever larger
        segments and rebuilds their graphs each time: a 1M rebuild fell to
        370 points/s that way, from 925 at 100k."""
        self._bulk += 1
        try:
            if self._optimizing is not None:
                await asyncio.gather(self._optimizing, return_exceptions=True)
            yield
        finally:
            self._bulk -= 1
        if self._since_optimize >= self._optimize_every:
            await self.optimize()

    async def optimize(self) -> None:
        """Optimise now and wait for it (recall calls this before it serves,
        and when a rebuild ends). qdrant-edge-py 0.9 holds the GIL while it
        optimises, so nothing else in the process runs meanwhile."""
        if self._shard is None:
            return
        self._since_optimize = 0
        started = time.perf_counter()
        await self._optimize()
        log.info("vector index optimised", seconds=round(time.perf_counter() - started, 1))

    async def _optimize(self) -> None:
        def optimize() -> None:
            # optimize() takes seconds at scale: run it without the lock, so searches go on.
            with self._optimize_guard:
                if self._shard is not None:
                    self._shard.optimize()

        try:
            await asyncio.to_thread(optimize)
        except Exception as exc:
            log.warning("vector index optimisation failed", error=str(exc))
        finally:
            self._optimizing = None
        self.resident.refresh_soon()  # the new segment's files, in place of the old ones

    async def delete(self, ids: list[str], *, tenant: str) -> None:
        """Remove the tenant's points of these memories (never another tenant's: projection.point_id)."""
        if ids:
            point_ids: list[int | uuid.UUID | str] = [uuid.UUID(point_id(tenant, i)) for i in ids]
            await self._run(lambda shard: shard.update(UpdateOperation.delete_points(point_ids)))
            await self._flush_when_due()
            await self._reopen_when_due(len(ids))

    async def search_many(self, queries: list[VectorQuery], *, with_payload: bool = False) -> list[list[VectorHit]]:
        """Several searches in one trip to the worker thread (edge_search.SearchPlan: a walk or an exact scan)."""
        asked = [(q, to_edge(vf.vector_filter(q))) for q in queries]
        plan = self._plan
        results = await self._run(lambda shard: [plan.search(shard, q, where, with_payload) for q, where in asked])
        return [[_hit(h, with_payload) for h in hits] for hits in results]

    async def count(self) -> int:
        if self._shard is None:
            return 0
        return await self._run(lambda shard: shard.count(CountRequest(exact=True)))

    async def count_by_tenant(self, limit: int) -> dict[str, int]:
        """An exact facet over the indexed `tenant` field: one call for every tenant."""
        if self._shard is None:
            return {}
        request = FacetRequest(key="tenant", limit=limit, exact=True)
        response = await self._run(lambda shard: shard.facet(request))
        return {str(hit.value): int(hit.count) for hit in response.hits if hit.count > 0}

    async def clear(self, tenant: str | None = None) -> None:
        """Remove the tenant's points (a delete by filter), or every point by
        replacing the shard with an empty one (same dimension and payload
        indexes): instant at any size, and the disk space is freed at once,
        where deleting points would leave them to a later vacuum. The old
        directory is renamed aside before it is deleted, so a crash never
        leaves a half-deleted shard (open() removes what was set aside, and
        creates an empty shard if none is there)."""
        if self._shard is None:
            raise RuntimeError("the vector index is not open")
        if tenant is not None:
            of_tenant = Filter(must=[to_edge(vf.of_tenant(tenant))])
            await self._run(lambda shard: shard.update(UpdateOperation.delete_points_by_filter(of_tenant)))
            await self._flush_when_due()
            log.info("vector index cleared", collection=self._collection, tenant=tenant)
            return

        def recreate() -> None:
            with self._lock, self._optimize_guard:
                old, self._shard = self._shard, None
                if old is not None:
                    old.close()
                shutil.rmtree(self._cleared, ignore_errors=True)
                self._path.rename(self._cleared)
                self._shard = self._create()
                self._plan = self._searching(self._shard)  # the new shard has today's links
                shutil.rmtree(self._cleared, ignore_errors=True)

        await asyncio.to_thread(recreate)
        self._since_optimize = 0
        self.resident.refresh_soon()
        log.info("vector index cleared", collection=self._collection)

    async def status(self) -> ComponentStatus:
        status = await vector_index_status(
            self, is_open=self._shard is not None, detail=f"qdrant-edge collection {self._collection}"
        )
        return self.resident.reported(status)

    async def close(self) -> None:
        if self._optimizing is not None:
            await asyncio.gather(self._optimizing, return_exceptions=True)
        if self._shard is not None:
            shard, self._shard = self._shard, None
            with self._lock:
                await asyncio.to_thread(shard.close)
        self._shard_lock.release()  # after the shard is closed: its WAL is free for the next owner
