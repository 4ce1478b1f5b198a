"""The outcome of a human review (docs/trust.md), pure: a pending memory
becomes verified, or rejected with a tombstone of its content."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from services.core.domain.errors import FailedPrecondition
from services.core.domain.model import EventKind, Memory, MemoryEvent
from services.core.domain.tombstones import REVIEW_REJECTED, Tombstone, tombstone_for
from services.core.domain.trust import TrustState, require_move, trust_of


@dataclass(frozen=True, slots=True)
class ReviewOutcome:
    """What one review writes, in one write: the memory moved, its REVIEWED
    event and, on a rejection, the tombstone and its TOMBSTONE_SET event."""

    memory: Memory
    events: list[MemoryEvent]
    tombstone: Tombstone | None


def review_outcome(memory: Memory, *, approve: bool, note: str, now: datetime) -> ReviewOutcome:
    """Approve (verified) or reject (rejected, its content tombstoned) a
    memory waiting for review; the event's reason is the reviewer's note or
    else the rule that sent it to review. A memory not pending review is
    FAILED_PRECONDITION naming its trust state."""
    current = trust_of(memory.trust_state)
    if current != TrustState.PENDING_REVIEW:
        raise FailedPrecondition(
            "NOT_PENDING_REVIEW",
            f"memory {memory.id} is not waiting for review (trust state '{current.value}')",
            field="id",
            trust_state=current.value,
        )
    target = TrustState.VERIFIED if approve else TrustState.REJECTED
    require_move(current, target, field="id")
    updated = replace(memory, trust_state=target.value, version=memory.version + 1, updated_at=now)
    events = [
        MemoryEvent.trust_moved(EventKind.REVIEWED, updated, current.value, now, reason=note or memory.review_rule)
    ]
    stone: Tombstone | None = None
    if not approve:
        stone = tombstone_for(memory.tenant, memory.id, memory.content, REVIEW_REJECTED, now)
        events.append(
            MemoryEvent.tombstone(EventKind.TOMBSTONE_SET, memory.tenant, memory.id, stone.id, stone.reason, now)
        )
    return ReviewOutcome(updated, events, stone)
