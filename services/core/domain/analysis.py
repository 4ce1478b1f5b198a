"""The analysis of a tenant's memories (GET /analyze), pure.

The graph counts (one pass per figure, over every memory of the tenant, not a
sample); this module shapes the counts into the document the route returns,
with AutoMem's keys (memory_types, temporal_insights, entity_frequency,
confidence_distribution, patterns, preferences) beside memgrid's own
(averages, states, trust_states, tag_frequency, time_distribution). Times are UTC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from services.core.domain.entities import ENTITY_TAG_PREFIX
from services.core.domain.times import format_iso

#: Days from 0001-01-01 (ordinal 1) to 1970-01-01: day numbers are days since the epoch.
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_MAX_ORDINAL = date.max.toordinal()
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


@dataclass(frozen=True, slots=True)
class TypeFigures:
    type: str
    count: int
    average_confidence: float
    average_importance: float


@dataclass(slots=True)
class AnalysisFigures:
    """What the graph counts for one tenant."""

    total: int = 0
    average_importance: float | None = None
    average_confidence: float | None = None
    first: datetime | None = None
    last: datetime | None = None
    #: Memories per state (one each: superseded, archived, not_yet_valid, expired, current).
    states: dict[str, int] = field(default_factory=dict)
    #: Memories per trust state (a record stored before trust states counts as active).
    trust_states: dict[str, int] = field(default_factory=dict)
    by_type: list[TypeFigures] = field(default_factory=list)
    #: low (< 0.4), medium (< 0.7), high.
    confidence_buckets: dict[str, int] = field(default_factory=dict)
    #: low (< 0.5), medium (< 0.8), high.
    importance_buckets: dict[str, int] = field(default_factory=dict)
    #: (days since the epoch, memories) by the memory's timestamp.
    days: list[tuple[int, int]] = field(default_factory=list)
    #: (hour of the day, memories, average importance).
    hours: list[tuple[int, int, float]] = field(default_factory=list)
    #: (tag, memories), most frequent first; entity tags apart.
    tags: list[tuple[str, int]] = field(default_factory=list)
    entity_tags: list[tuple[str, int]] = field(default_factory=list)
    #: Pattern nodes: (type, entity tag, members), largest first.
    patterns: list[tuple[str, str, int]] = field(default_factory=list)
    #: PREFERS_OVER edges: (preferred id, content, other id, content, context, strength), strongest first.
    preferences: list[tuple[str, str, str, str, str | None, float]] = field(default_factory=list)


def day_date(day: int) -> date:
    """The calendar date of a day number (days since 1970-01-01). The graph
    divides in floating point, which can round the last microsecond of
    9999-12-31 up to a day past date.max: the ends are clamped."""
    return date.fromordinal(min(max(_EPOCH_ORDINAL + day, 1), _MAX_ORDINAL))


def split_entity_tag(tag: str) -> tuple[str, str] | None:
    """(category, name) of an entity tag, or None for any other tag."""
    if not tag.lower().startswith(ENTITY_TAG_PREFIX):
        return None
    category, _, name = tag[len(ENTITY_TAG_PREFIX) :].partition(":")
    if not category or not name:
        return None
    return category, name


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def time_distribution(figures: AnalysisFigures) -> dict:
    """Memories by month, weekday and hour of their timestamp (UTC)."""
    by_month: dict[str, int] = {}
    by_weekday = dict.fromkeys(_WEEKDAYS, 0)
    for day, count in sorted(figures.days):
        when = day_date(day)
        month = f"{when.year:04d}-{when.month:02d}"
        by_month[month] = by_month.get(month, 0) + count
        by_weekday[_WEEKDAYS[when.weekday()]] += count
    return {
        "timezone": "UTC",
        "first": format_iso(figures.first),
        "last": format_iso(figures.last),
        "by_month": by_month,
        "by_weekday": by_weekday,
        "by_hour": {f"{hour:02d}": count for hour, count, _ in sorted(figures.hours)},
    }


def entity_frequencies(entity_tags: list[tuple[str, int]]) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """Entity counts flat (AutoMem's entity_frequency: a name in two
    categories counts in both) and by category, most frequent first."""
    flat: dict[str, int] = {}
    by_category: dict[str, dict[str, int]] = {}
    for tag, count in entity_tags:
        parts = split_entity_tag(tag)
        if parts is None:
            continue
        category, name = parts
        flat[name] = flat.get(name, 0) + count
        names = by_category.setdefault(category, {})
        names[name] = names.get(name, 0) + count
    ordered = dict(sorted(flat.items(), key=lambda item: (-item[1], item[0])))
    return ordered, {c: dict(sorted(n.items(), key=lambda i: (-i[1], i[0]))) for c, n in sorted(by_category.items())}


def analysis_document(figures: AnalysisFigures, *, at: datetime | None = None) -> dict:
    """The JSON document of GET /analyze."""
    flat_entities, entities_by_category = entity_frequencies(figures.entity_tags)
    return {
        "scope": "every memory stored for the tenant, whatever its state (see states)",
        "generated_at": format_iso(at or datetime.now(UTC)),
        "total_memories": figures.total,
        "averages": {
            "importance": _round(figures.average_importance),
            "confidence": _round(figures.average_confidence),
        },
        "states": dict(figures.states),
        "trust_states": dict(sorted(figures.trust_states.items())),
        "memory_types": {
            t.type: {
                "count": t.count,
                "average_confidence": _round(t.average_confidence) or 0,
                "average_importance": _round(t.average_importance) or 0,
            }
            for t in sorted(figures.by_type, key=lambda t: (-t.count, t.type))
        },
        "tag_frequency": dict(figures.tags),
        "entity_frequency": flat_entities,
        "entities_by_category": entities_by_category,
        "time_distribution": time_distribution(figures),
        "temporal_insights": {
            f"hour_{hour:02d}": {"count": count, "avg_importance": _round(importance) or 0}
            for hour, count, importance in sorted(figures.hours)
        },
        "confidence_distribution": {k: figures.confidence_buckets.get(k, 0) for k in ("low", "medium", "high")},
        "importance_distribution": {k: figures.importance_buckets.get(k, 0) for k in ("low", "medium", "high")},
        "patterns": [
            {"type": kind, "entity": (split_entity_tag(tag) or ("", tag))[1], "entity_tag": tag, "members": members}
            for kind, tag, members in figures.patterns
        ],
        "preferences": [
            {
                "prefers_id": preferred_id,
                "prefers": preferred,
                "over_id": other_id,
                "over": other,
                "context": context,
                "strength": _round(strength) or 0,
            }
            for preferred_id, preferred, other_id, other, context, strength in figures.preferences
        ],
    }
