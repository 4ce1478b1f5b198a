"""The vector index's filter of a VectorQuery, built once, pure.

The conditions are neutral (a keyword match, a float range, a null field,
point ids, and a nested filter of must / should / must_not), shaped like
Qdrant's own filter: each engine's adapter translates them in a few lines
(qdrant-client's models.Filter, qdrant-edge's Filter), as qdrant-client
interprets one models.Filter both locally and on a server. So what the
vector arm withholds is decided here only, and both engines agree by
construction (tests/integration/test_vector_congruence.py holds them equal).
"""

from __future__ import annotations

from dataclasses import dataclass

from services.core.domain.projection import ARCHIVED, VectorQuery, point_id


@dataclass(frozen=True, slots=True)
class Match:
    """The keyword field holds `value` (for a list field: among its values)."""

    field: str
    value: str


@dataclass(frozen=True, slots=True)
class Range:
    """The float field lies within the bounds given (None: unbounded)."""

    field: str
    gt: float | None = None
    gte: float | None = None
    lt: float | None = None
    lte: float | None = None


@dataclass(frozen=True, slots=True)
class IsNull:
    """The field is null or missing."""

    field: str


@dataclass(frozen=True, slots=True)
class HasId:
    """The point's id is one of these (projection.point_id)."""

    point_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Filter:
    """Every `must`, at least one `should` (when any), no `must_not`."""

    must: tuple[Condition, ...] = ()
    should: tuple[Condition, ...] = ()
    must_not: tuple[Condition, ...] = ()


Condition = Match | Range | IsNull | HasId | Filter


#: The payload fields each vector index keeps an index on, and their kind: exactly
#: the fields vector_filter matches or bounds (its test holds the two sets equal),
#: save `superseded_at`, read only for the few expired points. A field no filter
#: names is carried unindexed (`type`): an index costs every upsert and a pass over
#: every payload in each HNSW build. Each engine's adapter translates the kinds.
INDEXED_PAYLOAD: dict[str, str] = {
    "tenant": "keyword",
    "tags": "keyword",
    "tag_prefixes": "keyword",
    "lifecycle": "keyword",
    "t_valid": "float",
    "t_invalid": "float",
    "recorded_at": "float",
    "timestamp": "float",  # recall's time window
}


def of_tenant(tenant: str) -> Match:
    """The points of one tenant."""
    return Match("tenant", tenant)


def _tag_matches(query: VectorQuery, tags: tuple[str, ...]) -> list[Condition]:
    key = "tags" if query.tag_match == "exact" else "tag_prefixes"
    return [Match(key, tag) for tag in tags]


def vector_filter(query: VectorQuery) -> Filter:
    """The filter of a VectorQuery (its docstring is the contract). Current
    mode's terms are the graph scope's (rows.scope_where): valid at
    current_at, not expired unless superseded (the state pass replaces those
    by their head). Trust states are not filtered here: the state pass
    withholds them from the vector hits as from every arm's."""
    must: list[Condition] = [of_tenant(query.tenant)]
    must_not: list[Condition] = [Match("lifecycle", ARCHIVED)]
    if query.current_at is not None:
        now = query.current_at.timestamp()
        must_not.append(Range("t_valid", gt=now))
        expired = Range("t_invalid", lte=now)
        must_not.append(Filter(must=(expired, IsNull("superseded_at"))) if query.keep_superseded else expired)
    if query.recorded_before is not None:
        must_not.append(Range("recorded_at", gt=query.recorded_before.timestamp()))
    if query.window_start is not None:
        must.append(Range("timestamp", gte=query.window_start.timestamp()))
    if query.window_end is not None:
        must.append(Range("timestamp", lt=query.window_end.timestamp()))
    if query.tags:
        conditions = _tag_matches(query, query.tags)
        if query.tag_mode == "all":
            must += conditions
        else:
            must.append(Filter(should=tuple(conditions)))
    if query.exclude_tags:
        must_not += _tag_matches(query, query.exclude_tags)
    if query.exclude_ids:
        must_not.append(HasId(tuple(point_id(query.tenant, i) for i in query.exclude_ids)))
    if query.only_ids:
        must.append(HasId(tuple(point_id(query.tenant, i) for i in query.only_ids)))
    return Filter(must=tuple(must), must_not=tuple(must_not))
