"""QdrantClientIndex: recall's vector projection on a Qdrant server, through
qdrant-client's AsyncQdrantClient.

The same port, filters and dimension rules as EdgeVectorIndex (the
congruence tests run the same cases on both). qdrant-client's local mode
(`location=":memory:"` or a directory) runs it without a server, as the
tests do.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import numpy as np
import structlog
from qdrant_client import AsyncQdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from services.core.adapters.retry import with_backoff
from services.core.adapters.vector_status import vector_index_status
from services.core.domain import vector_filter as vf
from services.core.domain.model import ComponentStatus
from services.core.domain.projection import VectorHit, VectorQuery, point_id

log = structlog.get_logger()

#: Payload fields with an index, in qdrant-client's kinds (the rule: domain/vector_filter.py, INDEXED_PAYLOAD).
INDEXED_FIELDS = {
    name: {"keyword": models.PayloadSchemaType.KEYWORD, "float": models.PayloadSchemaType.FLOAT}[kind]
    for name, kind in vf.INDEXED_PAYLOAD.items()
}


def _retryable(exc: BaseException) -> bool:
    """Connection failures and server-side errors while the server comes up."""
    if isinstance(exc, UnexpectedResponse):
        return exc.status_code is None or exc.status_code >= 500
    return isinstance(exc, ResponseHandlingException | httpx.TransportError | ConnectionError)


def _hit(point, with_payload: bool) -> VectorHit:
    """A hit, named by the memory id its payload carries (the point id is derived: projection.point_id)."""
    payload = dict(point.payload or {})
    return VectorHit(str(payload.get("memory_id") or point.id), float(point.score), payload if with_payload else None)


#: What a search without payload still reads of each hit: the memory id.
_MEMORY_ID = models.PayloadSelectorInclude(include=["memory_id"])


def _conditions(conditions: tuple[vf.Condition, ...]) -> list | None:
    return [to_qdrant(c) for c in conditions] or None


def to_qdrant(condition: vf.Condition):
    """A neutral condition (domain/vector_filter.py) as qdrant-client's models
    (edge_filter.to_edge translates the same ones for qdrant-edge)."""
    match condition:
        case vf.Match(field, value):
            return models.FieldCondition(key=field, match=models.MatchValue(value=value))
        case vf.Range(field, gt, gte, lt, lte):
            return models.FieldCondition(key=field, range=models.Range(gt=gt, gte=gte, lt=lt, lte=lte))
        case vf.IsNull(field):
            return models.IsNullCondition(is_null=models.PayloadField(key=field))
        case vf.HasId(point_ids):
            return models.HasIdCondition(has_id=list(point_ids))
        case vf.Filter(must, should, must_not):
            return models.Filter(must=_conditions(must), should=_conditions(should), must_not=_conditions(must_not))
    raise TypeError(f"not a vector filter condition: {condition!r}")


#: VECTOR_QUANTIZATION for a new collection (the same as the embedded index's;
#: local mode accepts it and searches exactly).
QUANTIZATIONS = {
    "int8": models.ScalarQuantization(
        scalar=models.ScalarQuantizationConfig(type=models.ScalarType.INT8, always_ram=True)
    ),
    "none": None,
}


def _score_threshold(min_score: float | None) -> float | None:
    # The engine compares scores as float32 and keeps those above the threshold;
    # local mode compares in float64. The float32 value gives both the same cut.
    return None if min_score is None else float(np.float32(min_score))


class QdrantClientIndex:
    """A collection on a Qdrant server (`url`), or in qdrant-client's local
    mode (`location`: ":memory:" or a directory)."""

    def __init__(
        self,
        *,
        collection: str,
        vector_size: int,
        autodetect: bool = True,
        url: str | None = None,
        api_key: str | None = None,
        location: str | Path | None = None,
        wait_seconds: float = 120.0,
        retry_initial_seconds: float = 0.1,
        retry_max_seconds: float = 2.0,
        quantization: str = "int8",
    ):
        if (url is None) == (location is None):
            raise ValueError("give either a Qdrant server url or a local location")
        self._url = url
        self._api_key = api_key
        self._location = location
        self._collection = collection
        self.dimension = vector_size
        self._autodetect = autodetect
        self._wait = wait_seconds
        self._initial = retry_initial_seconds
        self._max = retry_max_seconds
        if quantization not in QUANTIZATIONS:
            raise ValueError(f"quantization must be one of {sorted(QUANTIZATIONS)}, got {quantization!r}")
        self._quantization = QUANTIZATIONS[quantization]
        #: (configured, found) when the collection has another dimension and autodetect is off.
        self.mismatch: tuple[int, int] | None = None
        self.refused = 0
        self._client: AsyncQdrantClient | None = None
        self._where = url if url is not None else f"local:{location}"

    def _new_client(self) -> AsyncQdrantClient:
        if self._url is not None:
            # No version probe: it runs on a thread at construction and only warns
            # while the server is still coming up; open() waits for the server instead.
            return AsyncQdrantClient(url=self._url, api_key=self._api_key, check_compatibility=False)
        if str(self._location) == ":memory:":
            return AsyncQdrantClient(location=":memory:")
        return AsyncQdrantClient(path=str(self._location))

    async def open(self) -> None:
        """Wait for the server, then create the collection (cosine, the
        configured dimension, payload indexes) or adopt an existing one.

        An existing collection keeps its dimension: with autodetect it is
        adopted; without, the index stays closed and the mismatch is reported
        (vectors are never truncated or padded to fit)."""
        if self._client is not None:
            return
        client = self._new_client()
        try:
            opened = await with_backoff(
                "qdrant",
                lambda: self._ensure_collection(client),
                retryable=_retryable,
                deadline_seconds=self._wait,
                initial_seconds=self._initial,
                max_seconds=self._max,
            )
        except Exception:
            await client.close()
            raise
        if opened:
            self._client = client
        else:
            await client.close()

    async def _ensure_collection(self, client: AsyncQdrantClient) -> bool:
        """False when the collection's dimension is not ours and autodetect is off."""
        if not await client.collection_exists(self._collection):
            try:
                await client.create_collection(
                    self._collection,
                    vectors_config=models.VectorParams(size=self.dimension, distance=models.Distance.COSINE),
                    quantization_config=self._quantization,
                )
            except UnexpectedResponse as exc:
                if exc.status_code != 409:  # another replica created it first
                    raise
        info = await client.get_collection(self._collection)
        vectors = info.config.params.vectors
        if not isinstance(vectors, models.VectorParams):
            raise ValueError(f"collection {self._collection} has named vectors; memgrid needs one unnamed vector")
        if vectors.size != self.dimension:
            if not self._autodetect:
                self.mismatch = (self.dimension, vectors.size)
                log.error("vector index dimension mismatch", configured=self.dimension, index=vectors.size)
                return False
            log.info("adopting the vector index's dimension", configured=self.dimension, index=vectors.size)
            self.dimension = vectors.size
        existing = info.payload_schema or {}
        for name, schema in INDEXED_FIELDS.items():
            if name not in existing:
                await client.create_payload_index(self._collection, name, field_schema=schema)
        return True

    def _open_client(self) -> AsyncQdrantClient:
        if self._client is None:
            raise RuntimeError("the vector index is not open")
        return self._client

    async def upsert(self, points: list[tuple[str, list[float], dict]]) -> None:
        if not points:
            return
        for _, vector, _ in points:
            if len(vector) != self.dimension:
                self.refused += 1
                raise ValueError(f"vector has {len(vector)} dimensions; the index holds {self.dimension}")
        batch = [
            models.PointStruct(
                id=point_id(payload.get("tenant", ""), i), vector=list(vector), payload={**payload, "memory_id": i}
            )
            for i, vector, payload in points
        ]
        await self._open_client().upsert(self._collection, points=batch, wait=True)

    async def delete(self, ids: list[str], *, tenant: str) -> None:
        """Remove the tenant's points of these memories (never another tenant's: projection.point_id)."""
        if ids:
            selector = models.PointIdsList(points=[point_id(tenant, i) for i in ids])
            await self._open_client().delete(self._collection, points_selector=selector, wait=True)

    async def search_many(self, queries: list[VectorQuery], *, with_payload: bool = False) -> list[list[VectorHit]]:
        """Several searches in one request."""
        client = self._open_client()
        if not queries:
            return []
        requests = [
            models.QueryRequest(
                query=list(q.vector),
                filter=to_qdrant(vf.vector_filter(q)),
                limit=q.limit,
                with_payload=True if with_payload else _MEMORY_ID,
                score_threshold=_score_threshold(q.min_score),
            )
            for q in queries
        ]
        responses = await client.query_batch_points(self._collection, requests=requests)
        return [[_hit(p, with_payload) for p in response.points] for response in responses]

    async def count(self) -> int:
        if self._client is None:
            return 0
        return (await self._client.count(self._collection, exact=True)).count

    async def count_by_tenant(self, limit: int) -> dict[str, int]:
        """An exact facet over the indexed `tenant` field: one request for every tenant."""
        if self._client is None:
            return {}
        response = await self._client.facet(self._collection, "tenant", limit=limit, exact=True)
        return {str(hit.value): int(hit.count) for hit in response.hits if hit.count > 0}

    async def clear(self, tenant: str | None = None) -> None:
        """Remove the tenant's points, or every point (a delete by an empty
        filter, which matches all): the collection keeps its configuration
        and payload indexes, and other replicas' searches go on meanwhile,
        which dropping and recreating the collection would break."""
        must = [] if tenant is None else [to_qdrant(vf.of_tenant(tenant))]
        selector = models.FilterSelector(filter=models.Filter(must=must))
        await self._open_client().delete(self._collection, points_selector=selector, wait=True)
        log.info("vector index cleared", collection=self._collection, tenant=tenant or "every tenant")

    async def status(self) -> ComponentStatus:
        return await vector_index_status(
            self, is_open=self._client is not None, detail=f"qdrant collection {self._collection} at {self._where}"
        )

    @asynccontextmanager
    async def bulk_load(self) -> AsyncIterator[None]:
        """Qdrant's bulk-upload advice: indexing off (indexing_threshold 0)
        while a rebuild's points go in, then back to what the collection had,
        so the server builds each segment's HNSW graph once, in the background.
        qdrant-client's local mode has no optimiser and ignores it."""
        client = self._open_client()
        info = await client.get_collection(self._collection)
        before = info.config.optimizer_config.indexing_threshold
        await client.update_collection(
            self._collection, optimizers_config=models.OptimizersConfigDiff(indexing_threshold=0)
        )
        try:
            yield
        finally:
            await client.update_collection(
                self._collection,
                optimizers_config=models.OptimizersConfigDiff(indexing_threshold=before if before else 20_000),
            )

    async def optimize(self) -> None:
        """A Qdrant server optimises in the background on its own."""

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()
