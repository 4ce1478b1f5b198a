"""An event as a durable consumer hands it to its handler, and what the handler made of it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from services.core.domain.model import MemoryEvent


class Outcome(Enum):
    """What a consumer's handler made of one delivered event."""

    DONE = "done"  # ack
    RETRY = "retry"  # nak with backoff; dead-lettered after the last attempt
    SKIP = "skip"  # ack without work (not for this consumer)


@dataclass(frozen=True, slots=True)
class Delivery:
    """An event as a durable consumer hands it to its handler: the attempt counts from 1."""

    event: MemoryEvent
    attempt: int
