"""New content checked against the tenant's tombstones in the query that
writes it (docs/trust.md), and forced past them only when asked."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from services.core.domain.errors import Aborted
from services.core.domain.model import Memory, MemoryEvent
from services.core.domain.tombstones import Tombstone, TombstoneGuard, TombstoneHeld, content_hash, refuse_tombstoned
from services.ingest.compare_and_set import compare_and_set


def _texts(memory: Memory) -> list[str]:
    """The texts a tombstone is looked up by: the content and, when a summary
    replaced it, the original."""
    original = memory.metadata.get("original_content") if isinstance(memory.metadata, dict) else None
    return [memory.content, original] if isinstance(original, str) and original else [memory.content]


def _mark_forced(events: list[MemoryEvent], forced: dict[int, Tombstone]) -> None:
    """Each event says which tombstone its write is forced past, if any
    (one whose tombstone went meanwhile is no longer forced)."""
    for index, event in enumerate(events):
        hit = forced.get(index)
        if hit is not None:
            event.forced, event.tombstone_id, event.reason = True, hit.id, hit.reason
        elif event.forced:
            event.forced, event.tombstone_id, event.reason = False, "", ""


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardedWrites:
    """Creates whose own query checks the tombstones. Without a trust store
    (`checked` false) nothing is checked."""

    checked: bool
    retries: int

    async def write(
        self,
        write: Callable[..., Awaitable[bool]],
        tenant: str,
        memories: list[Memory],
        events: list[MemoryEvent],
        *,
        force: bool,
        positions: Sequence[int] | None = None,
    ) -> bool:
        """Run `write(guard=...)` and answer what it answers. Content a
        tombstone holds is refused (ALREADY_EXISTS naming it; in a batch,
        whose items' indexes in the request are `positions`, the first such
        item refuses the whole batch); with force, the write is sent again
        with the events saying so (forced, tombstone_id), and it goes through
        only if exactly those tombstones still hold. The first try learns the
        tombstones; each retry follows a change of them."""
        hashes = [[content_hash(t) for t in _texts(m)] for m in memories]
        forced: dict[int, Tombstone] = {}

        async def attempt() -> bool | None:
            nonlocal forced
            guard = TombstoneGuard.of(tenant, hashes, forced) if self.checked else None
            try:
                return await write(guard=guard)
            except TombstoneHeld as held:
                forced = guard.hits(held.held) if guard is not None else {}
            if forced and not force:
                index = min(forced)
                raise refuse_tombstoned(forced[index], positions[index] if positions is not None else None)
            _mark_forced(events, forced)
            return None

        return await compare_and_set(
            attempt,
            retries=self.retries,
            gave_up=lambda: Aborted(
                "CONCURRENT_UPDATE", "the tombstones of this content kept changing; retry", field="content"
            ),
        )
