"""The relay's view of the graph: the outbox and the idempotency keys it sweeps."""

from __future__ import annotations

from typing import Protocol

from services.core.domain.outbox import OutboxEntry


class Outbox(Protocol):
    """The relay's view: events written with their records and not yet on
    the bus, and the expired idempotency keys it sweeps."""

    async def pending_outbox(self, older_than_us: int, limit: int) -> list[OutboxEntry]: ...

    async def delete_outbox(self, event_ids: list[str], tenants: list[str] | None = None) -> None:
        """Clear acknowledged events; `tenants` (each one's, in order) when the caller knows them."""
        ...

    async def purge_idempotency(self, now_us: int) -> int: ...
