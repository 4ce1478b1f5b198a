"""Which service reacts to which event kind: the one table.

Each entry is a durable consumer of the memory-event stream, run by one
service; the bus filters its subscription to exactly these kinds, so an
event of another kind never reaches it (services/core/wiring.py
subscription_spec builds the filter from the entry). The durable's name is a
setting; what the consumer does with an event is its handler's.
docs/extending.md, "An event consumer", says how to add one.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.core.domain.model import EventKind


@dataclass(frozen=True, slots=True)
class EventConsumer:
    """One consumer of memory events: its role, its service, the kinds it takes."""

    name: str
    service: str
    kinds: frozenset[EventKind]

    def takes(self, kind: EventKind) -> bool:
        return kind in self.kinds


#: A new or changed content gets its vector (enrich's first stage).
EMBEDDING = EventConsumer("embedding", "enrich", frozenset({EventKind.CREATED, EventKind.UPDATED}))

#: A memory with its vector gets entities, links and factuality (enrich's second stage).
ENRICHMENT = EventConsumer("enrichment", "enrich", frozenset({EventKind.EMBEDDED}))

#: Recall's vector index follows the graph. Every kind but those that change
#: nothing a point holds: decay writes relevance_score, clustering links the
#: memory to a MetaPattern, neither in the payload (domain/projection.py), so
#: a daily decay pass costs the index nothing (filtered at the bus: decoding
#: and acknowledging 100k of them queued recall's queries behind them); a
#: tombstone is no memory's point. ARCHIVED and RESTORED re-project (the
#: payload's lifecycle follows the record), DELETED removes the point,
#: TRUST_CHANGED and REVIEWED re-project (the payload holds trust_state).
PROJECTION = EventConsumer(
    "projection",
    "recall",
    frozenset(EventKind)
    - {EventKind.DECAYED, EventKind.CLUSTERED, EventKind.TOMBSTONE_SET, EventKind.TOMBSTONE_REMOVED},
)

EVENT_CONSUMERS: tuple[EventConsumer, ...] = (EMBEDDING, ENRICHMENT, PROJECTION)


def consumers_of(service: str) -> tuple[EventConsumer, ...]:
    """The consumers `service` runs (none for a service that only publishes)."""
    return tuple(c for c in EVENT_CONSUMERS if c.service == service)
