"""Recall use cases over ports: every read."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from services.core.domain.errors import InvalidArgument, NotFound
from services.core.domain.ids import validate_memory_id
from services.core.domain.model import ComponentStatus, Memory, Relation
from services.core.domain.projection import VectorHit, VectorQuery
from services.core.domain.times import to_micros
from services.core.ports import EventPublisher, GraphStore, VectorIndex


class RecallHandlers:
    def __init__(
        self,
        *,
        graph: GraphStore,
        vectors: VectorIndex,
        events: EventPublisher,
        relation_limit: int = 5,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ):
        self._graph = graph
        self._vectors = vectors
        self._events = events
        self._relation_limit = relation_limit
        self._clock = clock

    async def get_memory(self, tenant: str, memory_id: str) -> tuple[Memory, list[Relation]]:
        """One memory of the caller's tenant with its strongest relations;
        an access bumps last_accessed."""
        memory_id = validate_memory_id(memory_id)
        found = await self._graph.read_memory(
            tenant, memory_id, accessed_us=to_micros(self._clock()), relation_limit=self._relation_limit
        )
        if found is None:
            raise NotFound("MEMORY_NOT_FOUND", f"memory {memory_id} not found", field="id", id=memory_id)
        return found

    async def search_by_vector(
        self,
        tenant: str,
        vector: list[float],
        *,
        limit: int,
        min_score: float | None = None,
        current: bool = True,
        exclude_ids: tuple[str, ...] = (),
    ) -> list[tuple[Memory, float]]:
        """The vector arm: nearest memories of the tenant, current ones only
        unless `current` is False, hydrated from the graph (the source of truth)."""
        self._check_dimension(vector)
        query = VectorQuery(
            vector=vector,
            tenant=tenant,
            limit=limit,
            current_at=self._clock() if current else None,
            exclude_ids=exclude_ids,
            min_score=min_score,
        )
        hits = await self._vectors.search(query)
        found = await self._graph.get_memories(tenant, [h.id for h in hits])
        return [(found[h.id], h.score) for h in hits if h.id in found]

    async def find_similar(
        self, tenant: str, queries: list[tuple[str, list[float]]], *, limit: int, min_score: float
    ) -> list[list[VectorHit]]:
        """Nearest current memories to each vector, from the index alone."""
        for _, vector in queries:
            self._check_dimension(vector)
        now = self._clock()
        return await self._vectors.search_many(
            [
                VectorQuery(vector, tenant, limit, current_at=now, exclude_ids=(i,) if i else (), min_score=min_score)
                for i, vector in queries
            ],
            with_payload=True,
        )

    def _check_dimension(self, vector: list[float]) -> None:
        if len(vector) != self._vectors.dimension:
            raise InvalidArgument(
                "EMBEDDING_DIMENSION_MISMATCH",
                f"'embedding' has {len(vector)} dimensions; expected {self._vectors.dimension}",
                field="embedding",
            )

    async def system_status(self) -> tuple[int, list[ComponentStatus]]:
        """The memory count (all tenants) and the stores recall depends on."""
        graph = await self._graph.status()
        components = [graph, await self._events.status(), await self._vectors.status()]
        return int(graph.figures.get("memories", 0)), components
