"""The transactional outbox: an event written with its record, not yet on the bus."""

from __future__ import annotations

from dataclasses import dataclass

from services.core.domain.model import MemoryEvent


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """An event recorded with its write and not yet acknowledged by the bus."""

    event_id: str
    event: MemoryEvent
