"""The vector filter, built once (services.core.domain.vector_filter) and
translated per engine: the neutral conditions of a VectorQuery, and each
translator's output, the filter its engine was always given
(tests/integration/test_vector_congruence.py runs both engines on it)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
import qdrant_edge
from qdrant_client import models

from services.core.adapters.edge_filter import to_edge
from services.core.adapters.qdrant_index import to_qdrant
from services.core.domain.projection import ARCHIVED, VectorQuery, point_id
from services.core.domain.vector_filter import Filter, HasId, IsNull, Match, Range, of_tenant, vector_filter

NOW = datetime(2026, 6, 1, tzinfo=UTC)
T = NOW.timestamp()
ARCHIVED_OUT = Match("lifecycle", ARCHIVED)


def query(**fields) -> VectorQuery:
    return VectorQuery(vector=[1.0, 0.0], tenant="a", limit=5, **fields)


def test_history_keeps_the_tenant_and_drops_archived_points_only():
    assert vector_filter(query()) == Filter(must=(of_tenant("a"),), must_not=(ARCHIVED_OUT,))


def test_current_withholds_not_yet_valid_and_expired_but_superseded_points():
    kept = Filter(must=(Range("t_invalid", lte=T), IsNull("superseded_at")))
    assert vector_filter(query(current_at=NOW)).must_not == (ARCHIVED_OUT, Range("t_valid", gt=T), kept)
    strict = vector_filter(query(current_at=NOW, keep_superseded=False))
    assert strict.must_not == (ARCHIVED_OUT, Range("t_valid", gt=T), Range("t_invalid", lte=T))


def test_as_of_and_the_window_bound_recorded_at_and_timestamp():
    start, end = NOW - timedelta(days=7), NOW
    built = vector_filter(query(recorded_before=NOW, window_start=start, window_end=end))
    assert built.must == (of_tenant("a"), Range("timestamp", gte=start.timestamp()), Range("timestamp", lt=T))
    assert built.must_not == (ARCHIVED_OUT, Range("recorded_at", gt=T))


@pytest.mark.parametrize(
    ("tag_mode", "tag_match", "key"), [("any", "prefix", "tag_prefixes"), ("all", "exact", "tags")]
)
def test_tags_any_is_one_should_all_is_each_a_must(tag_mode, tag_match, key):
    built = vector_filter(query(tags=("x", "y"), tag_mode=tag_mode, tag_match=tag_match, exclude_tags=("z",)))
    wanted = (Match(key, "x"), Match(key, "y"))
    assert built.must[1:] == ((Filter(should=wanted),) if tag_mode == "any" else wanted)
    assert built.must_not == (ARCHIVED_OUT, Match(key, "z"))


def test_excluded_ids_are_the_tenants_point_ids():
    built = vector_filter(query(exclude_ids=("m1", "m2")))
    assert built.must_not[-1] == HasId((point_id("a", "m1"), point_id("a", "m2")))


def full_query() -> VectorQuery:
    return query(current_at=NOW, tags=("x",), exclude_tags=("z",), exclude_ids=("m1",))


def test_qdrant_client_gets_the_filter_it_always_got():
    field = models.FieldCondition
    expected = models.Filter(
        must=[
            field(key="tenant", match=models.MatchValue(value="a")),
            models.Filter(should=[field(key="tag_prefixes", match=models.MatchValue(value="x"))]),
        ],
        must_not=[
            field(key="lifecycle", match=models.MatchValue(value=ARCHIVED)),
            field(key="t_valid", range=models.Range(gt=T)),
            models.Filter(
                must=[
                    field(key="t_invalid", range=models.Range(lte=T)),
                    models.IsNullCondition(is_null=models.PayloadField(key="superseded_at")),
                ]
            ),
            field(key="tag_prefixes", match=models.MatchValue(value="z")),
            models.HasIdCondition(has_id=[point_id("a", "m1")]),
        ],
    )
    assert to_qdrant(vector_filter(full_query())) == expected


def test_qdrant_edge_gets_the_filter_it_always_got():
    field, match = qdrant_edge.FieldCondition, qdrant_edge.MatchValue
    expected = qdrant_edge.Filter(
        must=[
            field(key="tenant", match=match("a")),
            qdrant_edge.Filter(should=[field(key="tag_prefixes", match=match("x"))]),
        ],
        must_not=[
            field(key="lifecycle", match=match(ARCHIVED)),
            field(key="t_valid", range=qdrant_edge.RangeFloat(gt=T)),
            qdrant_edge.Filter(
                must=[
                    field(key="t_invalid", range=qdrant_edge.RangeFloat(lte=T)),
                    qdrant_edge.IsNullCondition("superseded_at"),
                ]
            ),
            field(key="tag_prefixes", match=match("z")),
            qdrant_edge.HasIdCondition({uuid.UUID(point_id("a", "m1"))}),
        ],
    )
    assert repr(to_edge(vector_filter(full_query()))) == repr(expected)


@pytest.mark.parametrize("translate", [to_qdrant, to_edge])
def test_a_translator_refuses_what_is_not_a_condition(translate):
    with pytest.raises(TypeError, match="not a vector filter condition"):
        translate("tenant = a")


def _fields(condition) -> set[str]:
    """The payload fields a filter names, at any depth."""
    if isinstance(condition, Filter):
        return {f for c in (*condition.must, *condition.should, *condition.must_not) for f in _fields(c)}
    return {condition.field} if hasattr(condition, "field") else set()


@pytest.mark.parametrize("tag_match", ["exact", "prefix"])
def test_every_field_a_filter_names_is_indexed_and_every_index_is_filtered_on(tag_match):
    """An unindexed filter reads each candidate's payload; an index no filter
    uses costs every upsert and a pass over every payload in each build. The
    one exception: `superseded_at`, read only for the few expired points."""
    from services.core.adapters import edge_schema, qdrant_index

    named = set()
    for mode in ("any", "all"):
        full = query(
            current_at=NOW,
            recorded_before=NOW,
            window_start=NOW,
            window_end=NOW,
            tags=("x",),
            tag_mode=mode,
            tag_match=tag_match,
            exclude_tags=("y",),
            exclude_ids=("m",),
            only_ids=("n",),
        )
        named |= _fields(vector_filter(full))
    tag_field = "tags" if tag_match == "exact" else "tag_prefixes"
    indexed = set(edge_schema.INDEXED_FIELDS)
    assert named - {"superseded_at"} == indexed - ({"tags", "tag_prefixes"} - {tag_field})
    assert set(qdrant_index.INDEXED_FIELDS) == indexed
    assert "type" not in indexed
