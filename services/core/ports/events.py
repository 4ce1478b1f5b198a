"""The event bus: publishing, one tenant's watch, a durable consumer's backlog."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Protocol

from services.core.domain.model import ComponentStatus, MemoryEvent
from services.core.domain.watch import SequencedEvent, WatchGap, WatchOpened


class EventPublisher(Protocol):
    """Publishes memory events durably (JetStream)."""

    @property
    def connected(self) -> bool:
        """Whether publishing can succeed right now."""

    async def publish_many(self, events: list[MemoryEvent]) -> list[bool]:
        """Publish a batch; per event, whether the bus acknowledged it. Never raises."""

    async def status(self) -> ComponentStatus: ...

    async def close(self) -> None: ...


class EventWatchSource(Protocol):
    """One tenant's memory events in stream order, from a stream sequence on."""

    def watch(
        self, tenant: str, after_sequence: int | None, kinds: list[str]
    ) -> AsyncGenerator[WatchOpened | WatchGap | SequencedEvent, None]:
        """`WatchOpened` first (once the watch is in place), then events and
        gaps until the caller stops iterating; None: only events from now on."""


class EventBacklog(Protocol):
    """A durable consumer, as a status report sees it."""

    async def pending(self) -> int:
        """Events on the stream the consumer has not handled yet."""
