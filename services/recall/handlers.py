"""Recall use cases over ports: every read."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from services.core.domain.errors import NotFound
from services.core.domain.ids import validate_memory_id
from services.core.domain.model import ComponentStatus, Memory, Relation
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
        memory = await self._graph.get_memory(tenant, memory_id)
        if memory is None:
            raise NotFound("MEMORY_NOT_FOUND", f"memory {memory_id} not found", field="id", id=memory_id)
        now = self._clock()
        await self._graph.touch_memory(tenant, memory_id, to_micros(now))
        memory.last_accessed = now
        return memory, await self._graph.relations_of(tenant, memory_id, self._relation_limit)

    async def system_status(self) -> tuple[int, list[ComponentStatus]]:
        """The memory count (all tenants) and the stores recall depends on."""
        graph = await self._graph.status()
        components = [graph, await self._events.status(), await self._vectors.status()]
        return int(graph.figures.get("memories", 0)), components
