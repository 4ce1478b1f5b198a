"""The analysis document of GET /analyze, shaped from the graph's counts (pure)."""

from __future__ import annotations

from datetime import UTC, date, datetime

from services.core.domain.analysis import (
    AnalysisFigures,
    TypeFigures,
    analysis_document,
    day_date,
    entity_frequencies,
    split_entity_tag,
    time_distribution,
)

AT = datetime(2026, 3, 18, 15, 30, tzinfo=UTC)


def days_since_epoch(day: date) -> int:
    return (day - date(1970, 1, 1)).days


def test_day_numbers_are_days_since_the_epoch():
    assert day_date(0) == date(1970, 1, 1)
    assert day_date(days_since_epoch(date(2024, 2, 29))) == date(2024, 2, 29)
    assert day_date(-1) == date(1969, 12, 31)


def test_a_day_number_rounded_past_the_calendar_ends_is_clamped():
    """The graph divides in floating point: 9999-12-31T23:59:59.999999 came back as a
    day past date.max, and /analyze answered 500 (found by the probe beside the fuzzer)."""
    assert day_date(days_since_epoch(date.max) + 1) == date.max
    assert day_date(days_since_epoch(date.min) - 1) == date.min


def test_entity_tags_split_into_category_and_name():
    assert split_entity_tag("entity:tools:pytest") == ("tools", "pytest")
    assert split_entity_tag("Entity:people:ada:lovelace") == ("people", "ada:lovelace")
    for other in ("project:alpha", "entity:", "entity:tools", "entity::x"):
        assert split_entity_tag(other) is None


def test_entity_frequencies_flat_and_by_category():
    flat, by_category = entity_frequencies(
        [("entity:tools:docker", 4), ("entity:projects:docker", 1), ("entity:people:ada", 2), ("db", 9)]
    )
    assert flat == {"docker": 5, "ada": 2}
    assert list(flat) == ["docker", "ada"]
    assert by_category == {"people": {"ada": 2}, "projects": {"docker": 1}, "tools": {"docker": 4}}


def test_time_distribution_by_month_weekday_and_hour():
    monday = days_since_epoch(date(2026, 3, 16))
    figures = AnalysisFigures(
        first=datetime(2026, 2, 28, tzinfo=UTC),
        last=AT,
        days=[(monday, 3), (monday + 1, 1), (days_since_epoch(date(2026, 2, 28)), 2)],
        hours=[(15, 4, 0.5), (9, 2, 0.25)],
    )
    distribution = time_distribution(figures)
    assert distribution["by_month"] == {"2026-02": 2, "2026-03": 4}
    assert distribution["by_weekday"]["Monday"] == 3 and distribution["by_weekday"]["Tuesday"] == 1
    assert distribution["by_weekday"]["Saturday"] == 2 and sum(distribution["by_weekday"].values()) == 6
    assert distribution["by_hour"] == {"09": 2, "15": 4}
    assert distribution["first"] == "2026-02-28T00:00:00+00:00" and distribution["timezone"] == "UTC"


def test_document_keeps_automem_keys_and_rounds():
    figures = AnalysisFigures(
        total=3,
        average_importance=0.56666666,
        average_confidence=0.9,
        states={"current": 2, "superseded": 1},
        trust_states={"verified": 1, "active": 2},
        by_type=[TypeFigures("Context", 1, 0.9, 0.3), TypeFigures("Decision", 2, 0.85, 0.71234)],
        confidence_buckets={"high": 3},
        tags=[("db", 2)],
        entity_tags=[("entity:tools:postgres", 2)],
        hours=[(10, 3, 0.56666666)],
        patterns=[("Decision", "entity:tools:postgres", 3)],
        preferences=[("a", "Tea", "b", "Coffee", None, 0.8)],
    )
    document = analysis_document(figures, at=AT)
    assert list(document["memory_types"]) == ["Decision", "Context"]  # most frequent first
    assert document["memory_types"]["Decision"] == {
        "count": 2, "average_confidence": 0.85, "average_importance": 0.712,
    }  # fmt: skip
    assert document["averages"] == {"importance": 0.567, "confidence": 0.9}
    assert list(document["trust_states"].items()) == [("active", 2), ("verified", 1)]
    assert document["temporal_insights"] == {"hour_10": {"count": 3, "avg_importance": 0.567}}
    assert document["confidence_distribution"] == {"low": 0, "medium": 0, "high": 3}
    assert document["importance_distribution"] == {"low": 0, "medium": 0, "high": 0}
    assert document["entity_frequency"] == {"postgres": 2}
    assert document["patterns"] == [
        {"type": "Decision", "entity": "postgres", "entity_tag": "entity:tools:postgres", "members": 3}
    ]
    assert document["preferences"][0]["prefers"] == "Tea" and document["preferences"][0]["over"] == "Coffee"
    assert document["generated_at"] == "2026-03-18T15:30:00+00:00" and document["total_memories"] == 3


def test_an_empty_tenant_has_an_empty_document():
    document = analysis_document(AnalysisFigures(), at=AT)
    assert document["total_memories"] == 0 and document["averages"] == {"importance": None, "confidence": None}
    assert document["memory_types"] == {} and document["time_distribution"]["by_month"] == {}
    assert sum(document["time_distribution"]["by_weekday"].values()) == 0
