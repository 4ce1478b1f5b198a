"""The memory record and its vocabulary. Pure data, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

#: The seven semantic types of the classifier.
MEMORY_TYPES = ("Decision", "Pattern", "Preference", "Style", "Habit", "Insight", "Context")
#: The classifier's fallback type.
FALLBACK_TYPE = "Memory"

#: Relation types a client may author through /associate.
AUTHORABLE_RELATIONS = (
    "RELATES_TO",
    "LEADS_TO",
    "OCCURRED_BEFORE",
    "PREFERS_OVER",
    "EXEMPLIFIES",
    "CONTRADICTS",
    "REINFORCES",
    "INVALIDATED_BY",
    "EVOLVED_INTO",
    "DERIVED_FROM",
    "PART_OF",
)
#: Relation types only the system writes.
SYSTEM_RELATIONS = ("SIMILAR_TO", "PRECEDED_BY", "DISCOVERED")
#: How relations rank beside their strength, where a memory's relations are
#: listed or followed: what a user linked first, then what memgrid found
#: alike, then mere adjacency in time (several automatic PRECEDED_BY edges of
#: strength 1.0 must not crowd out a RELATES_TO a user made).
SEMANTIC_SYSTEM_RELATIONS = ("SIMILAR_TO", "DISCOVERED")
TEMPORAL_RELATIONS = ("PRECEDED_BY",)


def relation_rank(kind: str) -> int:
    """0 for a relation a user made (or any other type), 1 for a semantic
    one memgrid made, 2 for temporal adjacency: lower ranks come first."""
    if kind in TEMPORAL_RELATIONS:
        return 2
    return 1 if kind in SEMANTIC_SYSTEM_RELATIONS else 0


#: Relations the current-state pass follows to the head of a chain.
SUPERSESSION_RELATIONS = ("INVALIDATED_BY", "EVOLVED_INTO")
#: Properties each authorable relation carries besides strength.
RELATION_PROPERTIES: dict[str, tuple[str, ...]] = {
    "RELATES_TO": (),
    "LEADS_TO": (),
    "OCCURRED_BEFORE": (),
    "PREFERS_OVER": ("context", "reason"),
    "EXEMPLIFIES": ("pattern_type", "confidence"),
    "CONTRADICTS": ("resolution", "reason"),
    "REINFORCES": ("observations",),
    "INVALIDATED_BY": ("reason", "timestamp"),
    "EVOLVED_INTO": ("confidence", "reason"),
    "DERIVED_FROM": ("transformation", "confidence"),
    "PART_OF": ("role", "context"),
}


#: The Memory fields that hold times (stored as epoch microseconds, sent as Timestamps).
TIME_FIELDS = (
    "timestamp", "t_valid", "t_invalid", "updated_at", "last_accessed", "recorded_at", "enriched_at", "superseded_at",
    "archived_at",
)  # fmt: skip


class EventKind(StrEnum):
    """What happened to a memory; the value is the subject suffix."""

    CREATED = "created"
    UPDATED = "updated"
    DELETED = "deleted"
    ASSOCIATED = "associated"
    EMBEDDED = "embedded"
    ENRICHED = "enriched"
    ARCHIVED = "archived"
    SUPERSEDED = "superseded"
    #: Consolidation's decay moved the relevance score by more than the event epsilon.
    DECAYED = "decayed"
    #: Consolidation grouped the memory into a MetaPattern.
    CLUSTERED = "clustered"
    #: An archived memory was brought back (PATCH {"archived": false}).
    RESTORED = "restored"
    #: The trust state moved (disputed by a CONTRADICTS edge, deprecated by a
    #: PATCH, ...): trust_state and previous_trust_state say from what to what.
    TRUST_CHANGED = "trust_changed"
    #: A review decided a pending memory: verified or rejected (trust_state).
    REVIEWED = "reviewed"
    #: A tombstone now keeps this memory's content out (tombstone_id, reason).
    TOMBSTONE_SET = "tombstone_set"
    #: An admin removed a tombstone (memory_id: the memory it was left for).
    TOMBSTONE_REMOVED = "tombstone_removed"


@dataclass(slots=True)
class Memory:
    """A memory as stored. Times are timezone-aware UTC datetimes."""

    id: str
    tenant: str
    content: str
    type: str
    confidence: float
    importance: float
    timestamp: datetime
    t_valid: datetime
    updated_at: datetime
    last_accessed: datetime
    recorded_at: datetime
    tags: list[str] = field(default_factory=list)
    tag_prefixes: list[str] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)
    embedding: list[float] | None = None
    t_invalid: datetime | None = None
    enriched_at: datetime | None = None
    summary: str = ""
    archived: bool = False
    relevance_score: float | None = None
    superseded_at: datetime | None = None
    archived_at: datetime | None = None
    version: int = 1
    #: Enrichment's factuality assessment {label, confidence, rationale}; None
    #: until enriched. Kept beside metadata, never in it: metadata holds what
    #: the client sent, plus only the keys reserved for enrichment.
    factuality: dict | None = None
    #: How far the memory may be relied on (services/core/domain/trust.py).
    trust_state: str = "active"
    #: The review rule that held it back (review_policy.RULES); "" when none did.
    review_rule: str = ""


@dataclass(slots=True)
class Relation:
    """A directed, typed edge between two memories of one tenant."""

    source_id: str
    target_id: str
    type: str
    strength: float
    created_at: datetime
    properties: dict = field(default_factory=dict)


@dataclass(slots=True)
class MemoryEvent:
    """A change to one memory, published on memory.events.<tenant>.<kind>."""

    event_id: str
    tenant: str
    kind: EventKind
    memory_id: str
    version: int
    occurred_at: datetime
    content_changed: bool = False
    relation: Relation | None = None
    has_embedding: bool = False
    #: The trust state after the change (every event of a change that set one).
    trust_state: str = ""
    #: TRUST_CHANGED and REVIEWED: the trust state before.
    previous_trust_state: str = ""
    #: Why: a review rule, a tombstone's reason, a delete's reason.
    reason: str = ""
    #: The write went through a tombstone because the request said force=true.
    forced: bool = False
    #: TOMBSTONE_SET / TOMBSTONE_REMOVED, and a forced CREATED: the tombstone.
    tombstone_id: str = ""

    @staticmethod
    def for_memory(
        kind: EventKind, memory: Memory, occurred_at: datetime, *, content_changed: bool = False
    ) -> MemoryEvent:
        """The event for a change to `memory`; its id is stable per (memory, kind, version)."""
        return MemoryEvent(
            event_id=f"{memory.id}:{kind.value}:{memory.version}",
            tenant=memory.tenant,
            kind=kind,
            memory_id=memory.id,
            version=memory.version,
            occurred_at=occurred_at,
            content_changed=content_changed,
            has_embedding=memory.embedding is not None,
            trust_state=memory.trust_state,
        )

    @staticmethod
    def trust_moved(
        kind: EventKind, memory: Memory, previous: str, occurred_at: datetime, *, reason: str = ""
    ) -> MemoryEvent:
        """TRUST_CHANGED or REVIEWED for `memory` (its trust state already
        moved from `previous`); stable per (memory, kind, version)."""
        event = MemoryEvent.for_memory(kind, memory, occurred_at)
        event.previous_trust_state = previous
        event.reason = reason
        return event

    @staticmethod
    def tombstone(
        kind: EventKind, tenant: str, memory_id: str, tombstone_id: str, reason: str, occurred_at: datetime
    ) -> MemoryEvent:
        """TOMBSTONE_SET or TOMBSTONE_REMOVED, keyed on the tombstone and the time."""
        stamp = int(occurred_at.timestamp() * 1_000_000)
        return MemoryEvent(
            event_id=f"{tombstone_id}:{kind.value}:{stamp}",
            tenant=tenant,
            kind=kind,
            memory_id=memory_id,
            version=0,
            occurred_at=occurred_at,
            reason=reason,
            tombstone_id=tombstone_id,
        )

    @staticmethod
    def deleted(tenant: str, memory_id: str, occurred_at: datetime) -> MemoryEvent:
        """The event for a deletion; there is no snapshot to carry."""
        return MemoryEvent(
            event_id=f"{memory_id}:deleted",
            tenant=tenant,
            kind=EventKind.DELETED,
            memory_id=memory_id,
            version=0,
            occurred_at=occurred_at,
        )

    @staticmethod
    def archived(
        tenant: str, memory_id: str, read_version: int, occurred_at: datetime, *, has_embedding: bool
    ) -> MemoryEvent:
        """The event for archiving a memory read at `read_version` (archiving
        bumps the version): stable per (memory, version), as a change is."""
        return MemoryEvent(
            event_id=f"{memory_id}:{EventKind.ARCHIVED.value}:{read_version + 1}",
            tenant=tenant,
            kind=EventKind.ARCHIVED,
            memory_id=memory_id,
            version=read_version + 1,
            occurred_at=occurred_at,
            has_embedding=has_embedding,
        )

    @staticmethod
    def consolidated(
        kind: EventKind, tenant: str, memory_id: str, version: int, occurred_at: datetime, *, has_embedding: bool
    ) -> MemoryEvent:
        """An event of a consolidation pass (decayed, clustered) that leaves the
        version as it is: keyed on the time too, so each run's event is its own."""
        stamp = int(occurred_at.timestamp() * 1_000_000)
        return MemoryEvent(
            event_id=f"{memory_id}:{kind.value}:{version}:{stamp}",
            tenant=tenant,
            kind=kind,
            memory_id=memory_id,
            version=version,
            occurred_at=occurred_at,
            has_embedding=has_embedding,
        )

    @staticmethod
    def associated(tenant: str, relation: Relation) -> MemoryEvent:
        """The event for a new or updated edge, keyed on the edge and its time."""
        stamp = int(relation.created_at.timestamp() * 1_000_000)
        return MemoryEvent(
            event_id=f"{relation.source_id}:{relation.type}:{relation.target_id}:{stamp}",
            tenant=tenant,
            kind=EventKind.ASSOCIATED,
            memory_id=relation.source_id,
            version=0,
            occurred_at=relation.created_at,
            relation=relation,
        )


@dataclass(frozen=True, slots=True)
class ComponentStatus:
    """The state of a dependency, as reported in /health."""

    name: str
    status: str
    detail: str = ""
    figures: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status in ("connected", "serving", "ok")
