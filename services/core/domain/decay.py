"""Decay: a memory's relevance score from its age, use, links, importance and confidence. Pure, no I/O.

relevance = exp(-base_rate × age_days)
            × (0.3 + 0.3 × access_factor)
            × relationship_factor
            × (0.5 + importance)
            × (0.7 + 0.3 × confidence),
clamped to [importance × floor_ratio, 1.0] (floor_ratio 0.3: an important
memory never fades below a third of its importance). Age counts from the
memory's `timestamp` (when it happened, as the client says), not from when
it was recorded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

_DAY_SECONDS = 86_400.0


@dataclass(frozen=True, slots=True)
class DecayPolicy:
    """The numbers of the decay formula (settings CONSOLIDATION_DECAY_*)."""

    #: Per-day rate of the age term exp(-base_rate × age_days).
    base_rate: float = 0.01
    #: An access within this many days counts in full (access_factor 1).
    access_fresh_days: float = 1.0
    #: Per-day rate at which an older access counts less: exp(-rate × days).
    access_rate: float = 0.05
    #: Weight of log1p(edges) in relationship_factor.
    relationship_weight: float = 0.3
    #: relationship_factor's ceiling, so a hub does not outrank everything.
    relationship_cap: float = 2.0
    #: The floor is importance × floor_ratio.
    floor_ratio: float = 0.3
    #: A score that moved by more than this emits a DECAYED event.
    event_epsilon: float = 0.01


def _days(later: datetime, earlier: datetime) -> float:
    return max(0.0, (later - earlier).total_seconds() / _DAY_SECONDS)


def access_factor(last_accessed: datetime | None, now: datetime, policy: DecayPolicy) -> float:
    """How recently the memory was used, in [0, 1]: 1 when last accessed
    within `access_fresh_days`, else exp(-access_rate × days since the last
    access) (a month unused: about 0.22). Never accessed (None): 0."""
    if last_accessed is None:
        return 0.0
    days = _days(now, last_accessed)
    if days < policy.access_fresh_days:
        return 1.0
    return math.exp(-policy.access_rate * days)


def relationship_factor(edges: int, policy: DecayPolicy) -> float:
    """How connected the memory is, in [1, relationship_cap]:
    1 + relationship_weight × ln(1 + edges), where `edges` counts its edges to
    other memories (either direction): no edges 1.0, 3 edges about 1.42,
    10 edges about 1.72. Logarithmic, so each new link adds less."""
    raw = 1.0 + policy.relationship_weight * math.log1p(max(0, edges))
    return min(policy.relationship_cap, raw)


def relevance(
    *,
    timestamp: datetime,
    last_accessed: datetime | None,
    edges: int,
    importance: float,
    confidence: float,
    now: datetime,
    policy: DecayPolicy,
) -> float:
    """The relevance score (the module's formula), clamped to [importance × floor_ratio, 1.0]."""
    importance = min(1.0, max(0.0, importance))
    confidence = min(1.0, max(0.0, confidence))
    score = (
        math.exp(-policy.base_rate * _days(now, timestamp))
        * (0.3 + 0.3 * access_factor(last_accessed, now, policy))
        * relationship_factor(edges, policy)
        * (0.5 + importance)
        * (0.7 + 0.3 * confidence)
    )
    return min(1.0, max(importance * policy.floor_ratio, score))


def moved(previous: float | None, score: float, epsilon: float) -> bool:
    """Whether a new score is worth an event: the first score, or a change above epsilon."""
    return previous is None or abs(score - previous) > epsilon


def emits(written: float | None, emitted: float | None, score: float, epsilon: float) -> bool:
    """Whether a new score is worth a DECAYED event: one that moved by more
    than epsilon from the score the last event carried (`emitted`; the
    written one when no event is on record). The first score emits nothing:
    nothing was there to decay from, and a first pass over a store would
    otherwise send one event per memory. Comparing with the last written
    score would let a score drift any distance in steps each below epsilon
    without a single event."""
    if written is None:
        return False
    return moved(written if emitted is None else emitted, score, epsilon)


@dataclass(frozen=True, slots=True)
class DecayRow:
    """What decay and forgetting read of one memory (a page of decay_page).

    `edges` counts the memory's edges to other memories of the tenant, both
    directions (Entity, Pattern and MetaPattern links are not relationships
    between memories and are left out)."""

    id: str
    version: int
    type: str
    importance: float
    confidence: float
    timestamp: datetime
    last_accessed: datetime
    edges: int
    relevance_score: float | None
    archived: bool
    has_embedding: bool
    #: The score the last DECAYED event carried (the event threshold compares
    #: with it, so a drift of many small writes still emits once it adds up).
    emitted_score: float | None = None
    #: Why the store could not read this record ('' when it could): the pass
    #: skips and counts it, and `id` names it (the node id when it has none).
    unreadable: str = ""


@dataclass(frozen=True, slots=True)
class RelevanceUpdate:
    """A score decay writes: where the version is still `version`; with
    `emit`, a DECAYED event too (the score moved by more than the epsilon)."""

    id: str
    version: int
    score: float
    emit: bool
