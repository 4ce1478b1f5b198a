"""What a CONTRADICTS edge does to trust (docs/trust.md), for ingest's
/associate and consolidation's creative association alike: the older of
the two memories becomes disputed and, when the review policy says so
(REVIEW_CONTRADICTIONS), the newer one waits for review."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime

from services.core.domain.model import EventKind, MemoryEvent
from services.core.domain.review_policy import CONTRADICTS, ReviewPolicy, contradiction_holds
from services.core.domain.times import to_micros
from services.core.domain.trust import TrustState, moved, trust_of
from services.core.ports.trust import DisputeStore


class Disputes:
    """Marks the memories of new CONTRADICTS edges, each move a compare-and-set
    with its TRUST_CHANGED event in one write (then handed to the relay)."""

    def __init__(
        self,
        trust: DisputeStore,
        submit: Callable[[list[MemoryEvent]], Awaitable[object]],
        review: ReviewPolicy | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ):
        self._trust = trust
        self._submit = submit
        self._review = review or ReviewPolicy()
        self._clock = clock

    async def contradicted(self, tenant: str, pairs: list[tuple[str, str]]) -> int:
        """For each (source, target) of a new CONTRADICTS edge: the older
        memory (timestamp, then recorded_at) disputed, the newer one sent to
        review when the policy says so. A move the state does not allow (a
        rejected memory) leaves it as it is; a memory that changed in between
        is left too (the edge stays). Returns how many memories moved."""
        ids = sorted({i for pair in pairs for i in pair})
        if not ids:
            return 0
        found = await self._trust.get_memories(tenant, ids)
        wanted: dict[str, tuple[TrustState, str]] = {}
        for source, target in pairs:
            a, b = found.get(source), found.get(target)
            if a is None or b is None or a.id == b.id:
                continue
            older, newer = sorted((a, b), key=lambda m: (m.timestamp, m.recorded_at, m.id))
            wanted.setdefault(older.id, (TrustState.DISPUTED, f"contradicted by {newer.id}"))
            if contradiction_holds(self._review):
                wanted.setdefault(newer.id, (TrustState.PENDING_REVIEW, CONTRADICTS))
        now = self._clock()
        moves = 0
        for memory_id, (target_state, why) in wanted.items():
            memory = found[memory_id]
            current = trust_of(memory.trust_state)
            after = moved(current, target_state)
            if after == current:
                continue
            rule = CONTRADICTS if after == TrustState.PENDING_REVIEW else memory.review_rule
            updated = replace(
                memory, trust_state=after.value, review_rule=rule, version=memory.version + 1, updated_at=now
            )
            event = MemoryEvent.trust_moved(EventKind.TRUST_CHANGED, updated, current.value, now, reason=why)
            if await self._trust.set_trust(updated, memory.version, [event], now_us=to_micros(now), before=memory):
                await self._submit([event])
                moves += 1
        return moves
