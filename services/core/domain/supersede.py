"""Supersession as one operation: the replacement is stored, the old memory's
validity window closes, and the edge old -> new records why."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from services.core.domain.errors import InvalidArgument
from services.core.domain.model import SUPERSESSION_RELATIONS, Memory, Relation
from services.core.domain.trust import TrustState, moved, trust_of

DEFAULT_SUPERSEDE_RELATION = "INVALIDATED_BY"
#: Strength of the supersession edge.
SUPERSEDE_STRENGTH = 1.0


def validate_supersede_relation(value: str | None) -> str:
    if value is None or not value.strip():
        return DEFAULT_SUPERSEDE_RELATION
    name = value.strip().upper()
    if name not in SUPERSESSION_RELATIONS:
        raise InvalidArgument(
            "INVALID_SUPERSEDE_RELATION",
            f"'supersede_relation' must be one of {', '.join(SUPERSESSION_RELATIONS)}, got {value!r}",
            field="supersede_relation",
        )
    return name


def close_superseded(old: Memory, replacement: Memory, *, reason: str, now: datetime) -> Memory:
    """The old memory, no longer valid from `now` (or earlier, if it already
    was), pointing at its replacement."""
    t_invalid = now if old.t_invalid is None else min(old.t_invalid, now)
    metadata = {**old.metadata, "superseded_by": replacement.id}
    if reason:
        metadata["supersede_reason"] = reason
    # Its trust state follows (a pending or rejected one stays as it is: trust.TRANSITIONS).
    trust = moved(trust_of(old.trust_state), TrustState.SUPERSEDED).value
    return replace(
        old,
        t_invalid=t_invalid,
        superseded_at=now,
        updated_at=now,
        metadata=metadata,
        version=old.version + 1,
        trust_state=trust,
    )


def supersession_edge(old: Memory, replacement: Memory, relation: str, *, reason: str, now: datetime) -> Relation:
    properties = {"reason": reason} if reason else {}
    return Relation(old.id, replacement.id, relation, SUPERSEDE_STRENGTH, now, properties)
