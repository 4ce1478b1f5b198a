"""Ingest use cases over ports: every write, validated by the domain rules."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog

from services.core.domain.classification import FALLBACK, Classification, classify_by_patterns
from services.core.domain.drafts import Draft, build_memory
from services.core.domain.limits import Limits
from services.core.domain.model import EventKind, Memory, MemoryEvent
from services.core.observability import EVENTS_PUBLISHED
from services.core.ports import EventPublisher, GraphStore

log = structlog.get_logger()


def classify_without_llm(content: str) -> Classification:
    """Regex patterns, else the fallback (the LLM step comes with a key)."""
    return classify_by_patterns(content) or FALLBACK


@dataclass(frozen=True, slots=True)
class Created:
    """The outcome of a create: the stored record and what was queued."""

    memory: Memory
    event_published: bool


class IngestHandlers:
    """Every write goes to the graph first (acknowledged writes are never
    lost), then an event goes to the bus; if the bus is down the record stays
    marked pending for the reconciler."""

    def __init__(
        self,
        *,
        graph: GraphStore,
        events: EventPublisher,
        limits: Limits,
        classify: Callable[[str], Classification] = classify_without_llm,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ):
        self._graph = graph
        self._events = events
        self._limits = limits
        self._classify = classify
        self._clock = clock
        self._new_id = new_id

    async def create_memory(self, tenant: str, draft: Draft) -> Created:
        now = self._clock()
        memory = build_memory(
            draft, memory_id=self._new_id(), tenant=tenant, now=now, limits=self._limits, classify=self._classify
        )
        await self._graph.create_memories([memory], event_pending=True)
        published = await self._publish(MemoryEvent.for_memory(EventKind.CREATED, memory, now))
        if published:
            await self._clear_pending(tenant, [memory.id])
        return Created(memory, published)

    async def _publish(self, event: MemoryEvent) -> bool:
        try:
            await self._events.publish(event)
        except Exception as exc:  # the record is safe in the graph, marked pending
            EVENTS_PUBLISHED.labels(event.kind.value, "deferred").inc()
            log.warning("event deferred", memory_id=event.memory_id, kind=event.kind.value, error=str(exc))
            return False
        EVENTS_PUBLISHED.labels(event.kind.value, "published").inc()
        return True

    async def _clear_pending(self, tenant: str, ids: list[str]) -> None:
        try:
            await self._graph.clear_event_pending(tenant, ids)
        except Exception as exc:  # a stale flag only costs a harmless re-publish
            log.warning("could not clear event_pending", ids=ids, error=str(exc))
