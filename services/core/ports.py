"""Ports: what the handlers need from the outside world, as Protocols.

Adapters in services.core.adapters implement them, one per technology; tests
inject the same adapters against real servers, or fakes proved equal to them.
"""

from __future__ import annotations

from typing import Protocol

from services.core.domain.model import ComponentStatus, Memory, MemoryEvent


class GraphStore(Protocol):
    """The source of truth. Every method is scoped to one tenant."""

    async def ensure_schema(self) -> None: ...

    async def create_memories(self, memories: list[Memory], *, event_pending: bool) -> None:
        """Write new Memory nodes in one batched query."""

    async def get_memory(self, tenant: str, memory_id: str) -> Memory | None: ...

    async def touch_memory(self, tenant: str, memory_id: str, last_accessed_us: int) -> None:
        """Record an access (last_accessed), without bumping the version."""

    async def clear_event_pending(self, tenant: str, memory_ids: list[str]) -> None:
        """Mark the events of these memories as published."""

    async def count_memories(self, tenant: str | None = None) -> int: ...

    async def status(self) -> ComponentStatus: ...

    async def close(self) -> None: ...


class EventPublisher(Protocol):
    """Publishes memory events durably (JetStream)."""

    async def publish(self, event: MemoryEvent) -> None:
        """Publish one event; raises when the bus did not acknowledge it."""

    async def status(self) -> ComponentStatus: ...

    async def close(self) -> None: ...


class VectorIndex(Protocol):
    """Recall's projection of the graph into vectors."""

    async def count(self) -> int: ...

    async def status(self) -> ComponentStatus: ...

    async def close(self) -> None: ...
