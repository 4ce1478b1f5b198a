"""The graph store's upkeep, and the lookups by id every consumer of the graph makes."""

from __future__ import annotations

from typing import Protocol

from services.core.domain.model import ComponentStatus, Memory


class GraphLifecycle(Protocol):
    """The graph store's own upkeep: schema at start-up, health, shutdown.
    Every service that holds a graph port also holds this one."""

    async def ensure_schema(self) -> None: ...

    async def status(self) -> ComponentStatus: ...

    async def close(self) -> None: ...


class MemoryLookup(Protocol):
    """Records by id, and how many a tenant holds: what every consumer of the graph reads."""

    async def get_memory(self, tenant: str, memory_id: str) -> Memory | None: ...

    async def get_memories(self, tenant: str, memory_ids: list[str]) -> dict[str, Memory]: ...

    async def count_memories(self, tenant: str | None = None) -> int: ...
