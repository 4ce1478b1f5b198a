"""Which stored memories a recall process's vector index still lacks, pure.

A memory is searchable by meaning only once enrichment has embedded it and
recall's projector has put its point in the index: a few hundred
milliseconds for one memory, but tens of seconds for a conversation stored
at once (the local model embeds about 25 to 50 memories a second on two
cores). A client that stores and then asks at once would get an answer
from the keyword arm alone for everything it just wrote. So the projector
notes each new memory that arrives without a vector, and a recall that
searches by vector first waits, a bounded time, for the ones noted before
it began (services/recall/fresh_reads.py decides how long).

This module keeps the notes: per tenant, the memories awaited and since
when, and when the last vector arrived. It holds at most `capacity`
notes in all (a note past that is not taken: such a backlog is not waited
for) and lets a note go after `expire_seconds` (a memory whose vector never
comes, enrichment being off or failing for it, is waited for no longer).
Times are seconds on any monotonic clock, passed in.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class FreshPolicy:
    """How long a recall waits for the vectors of what was stored before it (RECALL_FRESH_*)."""

    wait_seconds: float  # the longest wait (0: never)
    stall_seconds: float  # no wait once no vector has arrived for the tenant for this long
    max_awaited: int  # no wait when more than this many are awaited
    capacity: int  # notes kept, every tenant together
    expire_seconds: float  # a note is let go after this long


@dataclass(slots=True)
class _Tenant:
    awaited: dict[str, float] = field(default_factory=dict)  # memory id -> noted at
    #: When a vector last arrived, or the awaited set last went from empty to not: the
    #: last sign that the embedding stage is working through this tenant's notes.
    progress_at: float = 0.0


@dataclass(slots=True)
class FreshVectors:
    capacity: int
    expire_seconds: float
    _tenants: dict[str, _Tenant] = field(default_factory=dict)
    _size: int = 0

    def expect(self, tenant: str, ids: Iterable[str], now: float) -> int:
        """Note memories stored without a vector; returns how many were noted
        (none past the capacity)."""
        state = self._tenants.setdefault(tenant, _Tenant())
        if not state.awaited:
            state.progress_at = now
        noted = 0
        for memory_id in ids:
            if memory_id in state.awaited:
                continue
            if self._size >= self.capacity:
                break
            state.awaited[memory_id] = now
            self._size += 1
            noted += 1
        return noted

    def arrived(self, tenant: str, ids: Iterable[str], now: float) -> None:
        """These memories' points (with vectors) are in the index now."""
        state = self._tenants.get(tenant)
        if state is None:
            return
        if self._drop(state, ids):
            state.progress_at = now
        self._tidy(tenant, state)

    def forget(self, tenant: str, ids: Iterable[str]) -> None:
        """These memories are gone (deleted), so no vector is to come."""
        state = self._tenants.get(tenant)
        if state is not None:
            self._drop(state, ids)
            self._tidy(tenant, state)

    def count(self, tenant: str, now: float) -> int:
        """How many memories this tenant's index still lacks, noted at most
        `expire_seconds` ago (older notes are let go here)."""
        state = self._tenants.get(tenant)
        if state is None:
            return 0
        # Notes are kept in the order they were taken, so the expired ones come first.
        expired = []
        for memory_id, noted in state.awaited.items():
            if now - noted <= self.expire_seconds:
                break
            expired.append(memory_id)
        self._drop(state, expired)
        self._tidy(tenant, state)
        return len(state.awaited)

    def awaited(self, tenant: str, now: float) -> frozenset[str]:
        """The memories this tenant's index still lacks (as `count` counts them)."""
        if not self.count(tenant, now):
            return frozenset()
        return frozenset(self._tenants[tenant].awaited)

    def left(self, tenant: str, ids: frozenset[str]) -> int:
        """How many of `ids` are still awaited."""
        state = self._tenants.get(tenant)
        return 0 if state is None else sum(1 for i in ids if i in state.awaited)

    def idle_for(self, tenant: str, now: float) -> float:
        """Seconds since the last sign of progress on this tenant's notes."""
        state = self._tenants.get(tenant)
        return 0.0 if state is None else now - state.progress_at

    def __len__(self) -> int:
        return self._size

    def _drop(self, state: _Tenant, ids: Iterable[str]) -> int:
        dropped = 0
        for memory_id in ids:
            if state.awaited.pop(memory_id, None) is not None:
                dropped += 1
        self._size -= dropped
        return dropped

    def _tidy(self, tenant: str, state: _Tenant) -> None:
        if not state.awaited:
            self._tenants.pop(tenant, None)
