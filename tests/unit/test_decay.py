"""The decay formula, its two factors and its clamp."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from services.core.domain.decay import DecayPolicy, access_factor, emits, moved, relationship_factor, relevance

NOW = datetime(2026, 6, 1, tzinfo=UTC)
POLICY = DecayPolicy()


def score(**overrides) -> float:
    values = dict(
        timestamp=NOW - timedelta(days=20),
        last_accessed=NOW - timedelta(days=20),
        edges=0,
        importance=0.5,
        confidence=0.5,
        now=NOW,
        policy=POLICY,
    )
    values.update(overrides)
    return relevance(**values)


def test_access_factor_is_full_within_the_fresh_window_then_decays_exponentially():
    assert access_factor(NOW - timedelta(hours=23), NOW, POLICY) == 1.0
    assert access_factor(NOW - timedelta(days=30), NOW, POLICY) == pytest.approx(math.exp(-0.05 * 30))
    assert access_factor(None, NOW, POLICY) == 0.0
    assert access_factor(NOW + timedelta(days=1), NOW, POLICY) == 1.0  # a clock ahead is not negative age


def test_relationship_factor_grows_logarithmically_up_to_its_cap():
    assert relationship_factor(0, POLICY) == 1.0
    assert relationship_factor(3, POLICY) == pytest.approx(1 + 0.3 * math.log(4))
    assert relationship_factor(10, POLICY) > relationship_factor(3, POLICY)
    assert relationship_factor(10**9, POLICY) == 2.0


def test_relevance_is_the_issues_formula_exactly():
    age, since_access, edges, importance, confidence = 40.0, 10.0, 2, 0.6, 0.8
    expected = (
        math.exp(-0.01 * age)
        * (0.3 + 0.3 * math.exp(-0.05 * since_access))
        * (1 + 0.3 * math.log1p(edges))
        * (0.5 + importance)
        * (0.7 + 0.3 * confidence)
    )
    got = score(
        timestamp=NOW - timedelta(days=age),
        last_accessed=NOW - timedelta(days=since_access),
        edges=edges,
        importance=importance,
        confidence=confidence,
    )
    assert got == pytest.approx(expected)


def test_relevance_is_clamped_between_importance_times_the_floor_ratio_and_one():
    ancient = score(timestamp=NOW - timedelta(days=3650), last_accessed=None, importance=0.9)
    assert ancient == pytest.approx(0.9 * 0.3)
    fresh_hub = score(timestamp=NOW, last_accessed=NOW, edges=10**6, importance=1.0, confidence=1.0)
    assert fresh_hub == 1.0
    assert score(importance=0.0, timestamp=NOW - timedelta(days=5000)) >= 0.0


def test_older_less_used_and_less_connected_memories_score_lower():
    base = score()
    assert score(timestamp=NOW - timedelta(days=300)) < base
    assert score(last_accessed=NOW) > base
    assert score(edges=5) > base
    assert score(importance=0.9) > base and score(confidence=1.0) > base


def test_an_event_is_worth_it_only_when_the_score_moved_beyond_epsilon():
    assert moved(None, 0.5, 0.01)
    assert not moved(0.5, 0.505, 0.01)
    assert moved(0.5, 0.52, 0.01) and moved(0.5, 0.48, 0.01)


def test_the_event_threshold_compares_with_the_last_emitted_score_not_the_last_written():
    assert not emits(None, None, 0.5, 0.01)  # the first score is a baseline, not a change
    assert not emits(None, 0.5, 0.5, 0.01)  # no score written (a restore dropped it): first again
    # Written 0.496 (no event), emitted 0.5: 0.492 is 0.004 from the written one but 0.008 from the emitted: quiet.
    assert not emits(0.496, 0.5, 0.492, 0.01)
    # A drift in steps each below epsilon emits once it adds up beyond it from the last event.
    assert not moved(0.496, 0.489, 0.01) and emits(0.496, 0.5, 0.489, 0.01)
    # No event on record (scores written before it was kept): the written score stands in.
    assert not emits(0.5, None, 0.505, 0.01) and emits(0.5, None, 0.52, 0.01)
