"""One open SSE stream's buffer (gateway/stream.py): at most `size` events,
the gaps where newer events were dropped, and the notices of its watch."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime

from services.core.domain.watch import SequencedEvent, WatchGap


@dataclass(slots=True)
class Gap:
    """Events dropped at this point of a subscriber's stream."""

    count: int = 0
    first: datetime | None = None
    last: datetime | None = None
    first_sequence: int = 0
    last_sequence: int = 0

    def add(self, item: SequencedEvent) -> None:
        self.count += 1
        self.first = self.first or item.event.occurred_at
        self.last = item.event.occurred_at
        self.first_sequence = self.first_sequence or item.sequence
        self.last_sequence = item.sequence


@dataclass(slots=True)
class Notice:
    """A change of the stream's watch on recall: `interrupted` or `resumed`."""

    kind: str
    since: datetime
    until: datetime | None = None
    #: For `resumed`: the sequence the new watch delivers after.
    after_sequence: int | None = None


@dataclass(eq=False)
class Subscriber:
    """One open stream: a buffer of at most `size` events, with the gaps
    where newer events were dropped, and notices, in order. `received` is the
    last stream sequence taken from recall (buffered or dropped): a new watch
    starts after it, so nothing is received twice."""

    id: int
    tenant: str
    size: int
    connected_at: datetime
    kinds: list[str] = field(default_factory=list)
    received: int = 0
    watching: bool = True
    delivered: int = 0
    dropped: int = 0
    items: deque = field(default_factory=deque)
    queued: int = 0
    closed: bool = False
    _wake: asyncio.Event = field(default_factory=asyncio.Event)

    def offer(self, item: SequencedEvent) -> bool:
        """Buffer the event, or count it dropped when the buffer is full."""
        self.received = item.sequence
        if self.queued < self.size:
            self.items.append(item)
            self.queued += 1
            self._wake.set()
            return True
        if not self.items or not isinstance(self.items[-1], Gap):
            self.items.append(Gap())
        self.items[-1].add(item)
        self.dropped += 1
        self._wake.set()
        return False

    def lost(self, gap: WatchGap) -> None:
        """The stream no longer holds what this subscriber asked for."""
        self.received = gap.resumed_after
        self.items.append(gap)
        self._wake.set()

    def notice(self, notice: Notice) -> None:
        """Queue a notice. Notices the client has not read yet collapse
        (interrupted, resumed, interrupted is still interrupted since the
        first), so a flapping connection cannot grow the buffer."""
        last = self.items[-1] if self.items else None
        before = self.items[-2] if len(self.items) > 1 else None
        unread = isinstance(last, Notice) and (
            last.kind == "interrupted" or (isinstance(before, Notice) and before.kind == "interrupted")
        )
        if notice.kind == "interrupted" and unread:
            if isinstance(last, Notice) and last.kind == "resumed":  # a Notice: unread
                self.items.pop()  # lost again before the client read that it had resumed
        elif notice.kind == "resumed" and isinstance(last, Notice) and last.kind == "interrupted":
            self.items.append(Notice("resumed", last.since, notice.until, notice.after_sequence))
        else:
            self.items.append(notice)
        self._wake.set()

    def close(self) -> None:
        self.closed = True
        self._wake.set()

    async def next(self, wait_seconds: float):
        """The next item, or None when `wait_seconds` pass with nothing to send."""
        if not self.items:
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), wait_seconds)
            except TimeoutError:
                return None
            if not self.items:
                return None
        item = self.items.popleft()
        if isinstance(item, SequencedEvent):
            self.queued -= 1
        return item


@dataclass(slots=True)
class TenantTotals:
    delivered: int = 0
    dropped: int = 0
