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


#: How long, at most, one look at the stream answers for (the gap watch asks
#: before a fetch only once it is older, while the stream's limits allow it:
#: look_lasts). A lone create's event then costs recall's consumer no
#: STREAM.INFO of its own (docs/performance.md, Write path A/B).
LOOK_SECONDS = 1.0
#: What no stream is taken to store within LOOK_SECONDS: a message, or byte,
#: limit at least this large cannot push out one stored after a look before
#: the look is that old.
BURST_MESSAGES = 1_000_000
BURST_BYTES = 1 << 30


@dataclass(frozen=True, slots=True)
class StreamLimits:
    """What removes events from the stream: its age, message, byte and
    per-subject limits (0: none), and whether anything else can (a
    retention other than by limits, a message's own time to live, a rollup)."""

    max_age_seconds: float = 0.0
    max_msgs: int = 0
    max_bytes: int = 0
    max_msgs_per_subject: int = 0
    by_limits_only: bool = True


def look_lasts(limits: StreamLimits) -> float:
    """How long a look at the stream answers for (seconds; 0: look before
    every fetch). A consumer that has read up to the stream's last sequence
    at the look has left to read only events stored after it, and retention
    removes such an event only once it is `max_age` old, or once a message
    limit's worth of events (a byte limit's worth of bytes) came after it:
    not within LOOK_SECONDS while the age limit is at least twice that and
    the others at least a burst. The events up to that last sequence were
    checked by the look itself. A purge by hand is not retention: one
    inside that time can go unreported, as one between a look and its fetch
    always could."""
    if not limits.by_limits_only:
        return 0.0
    if 0 < limits.max_age_seconds < 2 * LOOK_SECONDS:
        return 0.0
    if any(0 < n < BURST_MESSAGES for n in (limits.max_msgs, limits.max_msgs_per_subject)):
        return 0.0
    if 0 < limits.max_bytes < BURST_BYTES:
        return 0.0
    return LOOK_SECONDS
