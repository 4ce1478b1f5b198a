"""A watch of one tenant's memory events: what it yields besides the events' own fields."""

from __future__ import annotations

from dataclasses import dataclass

from services.core.domain.model import MemoryEvent


@dataclass(frozen=True, slots=True)
class WatchOpened:
    """A watch is open: it delivers the events after `after_sequence`; the
    stream holds `first_sequence`..`last_sequence` (0 and 0 when empty)."""

    after_sequence: int
    first_sequence: int
    last_sequence: int


@dataclass(frozen=True, slots=True)
class WatchGap:
    """Events a watch cannot deliver: `expired` (older than the stream's
    retention) or `reset` (beyond the stream's end: it was recreated)."""

    requested_after: int
    resumed_after: int
    reason: str


@dataclass(frozen=True, slots=True)
class SequencedEvent:
    """A memory event with its stream sequence (increasing within the stream)."""

    sequence: int
    event: MemoryEvent


@dataclass(frozen=True, slots=True)
class WatchHeartbeat:
    """A watch had nothing to send for a while: it is alive, the tenant quiet."""
