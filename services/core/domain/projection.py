"""The vector index is a projection of the graph. Its payload is built here,
by ONE function, from the graph record, so every vector hit carries the
validity window, archived flag, tenant, tags and trust state (the
reference's two payload writers disagreed; spec 002 section 5)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from services.core.domain.model import Memory

ACTIVE = "active"
ARCHIVED = "archived"


def epoch_seconds(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def vector_payload(memory: Memory) -> dict:
    """What a vector point carries: everything a filter needs, nothing more."""
    factuality = memory.metadata.get("factuality") if isinstance(memory.metadata, dict) else None
    return {
        "tenant": memory.tenant,
        "type": memory.type,
        "tags": list(memory.tags),
        "tag_prefixes": list(memory.tag_prefixes),
        "importance": memory.importance,
        "confidence": memory.confidence,
        "timestamp": epoch_seconds(memory.timestamp),
        "t_valid": epoch_seconds(memory.t_valid),
        "t_invalid": epoch_seconds(memory.t_invalid),
        "superseded_at": epoch_seconds(memory.superseded_at),
        "archived": memory.archived,
        # The same as a keyword: filters match keywords reliably in every engine
        # (qdrant-edge-py 0.9 does not match booleans).
        "lifecycle": ARCHIVED if memory.archived else ACTIVE,
        "factuality": factuality.get("label") if isinstance(factuality, dict) else None,
        "source": memory.metadata.get("source") if isinstance(memory.metadata, dict) else None,
        "version": memory.version,
    }


@dataclass(frozen=True, slots=True)
class VectorQuery:
    """A nearest-neighbour query, always within one tenant. With `current_at`
    set, archived, expired and not-yet-valid points are filtered out."""

    vector: list[float]
    tenant: str
    limit: int
    current_at: datetime | None = None
    exclude_ids: tuple[str, ...] = ()
    min_score: float | None = None


@dataclass(frozen=True, slots=True)
class VectorHit:
    id: str
    score: float
    payload: dict | None = None
