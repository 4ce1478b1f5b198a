"""The vector index is a projection of the graph. Its payload is built here,
by ONE function, from the graph record, so every vector hit carries the
validity window, archived flag, tenant, tags and trust state (the
reference's two payload writers disagreed)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from services.core.domain.model import Memory

ACTIVE = "active"
ARCHIVED = "archived"


def epoch_seconds(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


#: The namespace of point ids (uuid5): any fixed UUID, never to change (every index's ids come from it).
_POINT_NAMESPACE = uuid.UUID("5b0f8f7e-3c1a-4c7e-9a51-6d2f0c9e4b18")


def point_id(tenant: str, memory_id: str) -> str:
    """A memory's point id: derived from its tenant and its id, so a tenant's ids can never name
    (overwrite, delete, exclude) another tenant's point, whatever ids an archive brings. The memory's
    own id travels in the payload (`memory_id`), and hits answer with it."""
    return str(uuid.uuid5(_POINT_NAMESPACE, f"{tenant}\x00{memory_id}"))


def vector_payload(memory: Memory) -> dict:
    """What a vector point carries: everything a filter needs, nothing more."""
    metadata = memory.metadata if isinstance(memory.metadata, dict) else {}
    factuality = memory.factuality
    return {
        "memory_id": memory.id,
        "tenant": memory.tenant,
        "type": memory.type,
        # Lowercase, so tag filters are case-insensitive like every other tag match.
        "tags": sorted({t.lower() for t in memory.tags}),
        "tag_prefixes": list(memory.tag_prefixes),
        "importance": memory.importance,
        "confidence": memory.confidence,
        "timestamp": epoch_seconds(memory.timestamp),
        "t_valid": epoch_seconds(memory.t_valid),
        "t_invalid": epoch_seconds(memory.t_invalid),
        "recorded_at": epoch_seconds(memory.recorded_at),
        "superseded_at": epoch_seconds(memory.superseded_at),
        "archived": memory.archived,
        # The same as a keyword: filters match keywords reliably in every engine
        # (qdrant-edge-py 0.9 does not match booleans).
        "lifecycle": ARCHIVED if memory.archived else ACTIVE,
        "factuality": factuality.get("label") if isinstance(factuality, dict) else None,
        "source": metadata.get("source"),
        "version": memory.version,
        # The state pass withholds by it (services/recall/current_state.py); here so every arm agrees.
        "trust_state": memory.trust_state,
    }


def vector_points(memories: Iterable[Memory], dimension: int) -> tuple[list[tuple[str, list[float], dict]], int]:
    """The index's points of these memories (id, vector, vector_payload): those
    with a vector of the index's `dimension`; and how many had a vector of
    another dimension (refused, never truncated or padded). A memory without a
    vector yet has no point."""
    points, other = [], 0
    for m in memories:
        if m.embedding is None:
            continue
        if len(m.embedding) != dimension:
            other += 1
            continue
        points.append((m.id, m.embedding, vector_payload(m)))
    return points, other


@dataclass(frozen=True, slots=True)
class VectorQuery:
    """A nearest-neighbour query, always within one tenant; archived points
    are never candidates (the candidate searches skip them).

    With `current_at` set, not-yet-valid points are withheld, and so are
    expired ones, except those superseded (`superseded_at` set) when
    `keep_superseded` holds: the current-state pass replaces those by the
    head of their chain rather than dropping them.

    Tags are lowercase. `tag_match` "exact" matches `tags`, "prefix" matches
    `tag_prefixes` (so "project" finds "project:alpha"); `tag_mode` "any"
    needs one of `tags`, "all" every one. `exclude_tags` drops a point with
    any of them (exact or prefix, as `tag_match`). `recorded_before` (as_of)
    drops points recorded later. `window_start`/`window_end` (recall's time
    window) keep points whose `timestamp` is in [start, end), the bounds the
    graph arms use (scope_where: timestamp >= start AND timestamp < end).
    """

    vector: list[float]
    tenant: str
    limit: int
    current_at: datetime | None = None
    exclude_ids: tuple[str, ...] = ()
    #: When set, only these memories are candidates (a recall's widening scores them by the question).
    only_ids: tuple[str, ...] = ()
    min_score: float | None = None
    tags: tuple[str, ...] = ()
    tag_mode: str = "any"
    tag_match: str = "prefix"
    exclude_tags: tuple[str, ...] = ()
    keep_superseded: bool = True
    recorded_before: datetime | None = None
    window_start: datetime | None = None
    window_end: datetime | None = None


@dataclass(frozen=True, slots=True)
class VectorHit:
    id: str
    score: float
    payload: dict | None = None
