"""Recall use cases over ports: every read."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from services.core.domain.errors import NotFound
from services.core.domain.model import ComponentStatus, Memory
from services.core.domain.times import to_micros
from services.core.ports import EventPublisher, GraphStore, VectorIndex


class RecallHandlers:
    def __init__(
        self,
        *,
        graph: GraphStore,
        vectors: VectorIndex,
        events: EventPublisher,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ):
        self._graph = graph
        self._vectors = vectors
        self._events = events
        self._clock = clock

    async def get_memory(self, tenant: str, memory_id: str) -> Memory:
        """One memory of the caller's tenant; an access bumps last_accessed."""
        memory = await self._graph.get_memory(tenant, memory_id)
        if memory is None:
            raise NotFound("MEMORY_NOT_FOUND", f"memory {memory_id} not found", field="id", id=memory_id)
        now = self._clock()
        await self._graph.touch_memory(tenant, memory_id, to_micros(now))
        memory.last_accessed = now
        return memory

    async def system_status(self) -> tuple[int, list[ComponentStatus]]:
        """The memory count (all tenants) and the stores recall depends on."""
        graph = await self._graph.status()
        components = [graph, await self._events.status(), await self._vectors.status()]
        return int(graph.figures.get("memories", 0)), components
