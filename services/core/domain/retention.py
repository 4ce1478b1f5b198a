"""Bounded retention of the event stream: when a consumer lost events.

The stream keeps events for a bounded age and size (NATS_STREAM_MAX_AGE_SECONDS,
NATS_STREAM_MAX_BYTES). A durable consumer's position is the stream sequence it
reads next; once retention removed that sequence, the events from it up to the
stream's first are gone before the consumer saw them, and JetStream would go on
from the first one without a word. The rule here decides it; the consumer
reports what it decided (docs/operations.md, Retention) and repairs from the graph.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


def events_lost(delivered_sequence: int, first_sequence: int) -> int:
    """How many of the stream's sequences a consumer can no longer read: those
    from its next one (the last it was delivered, or skipped past, plus one) to
    before the stream's first held one. 0 when it is not behind: the stream is
    empty and never held anything (first 0), or still holds its next sequence.

    An upper bound: a filtered consumer would have skipped the lost sequences
    of other subjects anyway, but which they were is gone with them."""
    if first_sequence <= 0:
        return 0
    return max(0, first_sequence - (delivered_sequence + 1))


@dataclass(frozen=True, slots=True)
class ConsumerGap:
    """Events a durable consumer lost to retention: sequences `next_sequence`
    to `first_sequence` - 1, found at `detected_at`."""

    consumer: str
    next_sequence: int
    first_sequence: int
    detected_at: datetime

    @property
    def lost(self) -> int:
        """The sequences lost (at most: see events_lost)."""
        return self.first_sequence - self.next_sequence
