"""classify_by_patterns: the regex step of the classifier."""

from __future__ import annotations

import pytest

from services.core.domain.classification import classify_by_patterns


@pytest.mark.parametrize(
    ("content", "expected_type"),
    [
        ("Chose PostgreSQL over MongoDB for ACID compliance", "Decision"),
        ("We decided to ship on Friday", "Decision"),
        ("Usually write integration tests before deploying", "Pattern"),
        ("Prefer async/await over callbacks for clarity", "Preference"),
        ("The release notes were formatted as a table", "Style"),
        ("Backups run weekly", "Habit"),
        ("Realized embedding batching reduces costs by 40%", "Insight"),
        ("During database migration sprint in Q3 2024", "Context"),
    ],
)
def test_one_matching_pattern_gives_its_type_with_confidence_0_6(content, expected_type):
    found = classify_by_patterns(content)
    assert found is not None
    assert found.type == expected_type
    assert found.confidence == pytest.approx(0.6)


def test_matching_is_case_insensitive():
    found = classify_by_patterns("DECIDED TO rewrite the parser")
    assert found is not None and found.type == "Decision"


@pytest.mark.parametrize(
    ("content", "confidence"),
    [
        ("we usually and typically deploy on Mondays", 0.8),
        ("we usually, typically, consistently deploy on Mondays", 0.9),
        ("we usually, typically, often, consistently deploy on Mondays", 0.95),
        ("we usually, typically, often tend to consistently deploy on Mondays", 0.95),
    ],
)
def test_more_matches_raise_confidence_up_to_0_95(content, confidence):
    found = classify_by_patterns(content)
    assert found is not None
    assert found.type == "Pattern"
    assert found.confidence == pytest.approx(confidence)


def test_the_first_type_in_order_wins():
    # "decided to" is a Decision pattern, "during" and "when" are Context patterns.
    found = classify_by_patterns("We decided to freeze deploys during the migration when traffic peaked")
    assert found is not None
    assert found.type == "Decision"
    assert found.confidence == pytest.approx(0.6)  # only Decision's own matches count


def test_pattern_beats_habit_and_insight():
    found = classify_by_patterns("I realized we usually run this daily")
    assert found is not None and found.type == "Pattern"


def test_nothing_matching_gives_none():
    assert classify_by_patterns("The sky is blue.") is None


def test_always_alone_is_a_habit():
    found = classify_by_patterns("I always run the linter")
    assert found is not None
    assert (found.type, found.confidence) == ("Habit", pytest.approx(0.6))


@pytest.mark.parametrize("content", ["I always use tabs", "We ALWAYS   USE the staging cluster"])
def test_always_use_is_not_a_habit(content):
    found = classify_by_patterns(content)
    assert found is None or found.type != "Habit"


def test_always_used_is_still_a_habit():
    found = classify_by_patterns("I always used to run it")
    assert found is not None and found.type == "Habit"


def test_always_and_daily_count_as_two_habit_matches():
    found = classify_by_patterns("I always run backups daily")
    assert found is not None
    assert (found.type, found.confidence) == ("Habit", pytest.approx(0.8))


def test_always_use_is_a_preference():
    found = classify_by_patterns("I always use tabs")
    assert found is not None
    assert (found.type, found.confidence) == ("Preference", pytest.approx(0.6))
