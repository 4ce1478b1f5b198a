"""Creative association: pair choice from a sample and the contradiction rule."""

from __future__ import annotations

import math

from services.core.domain.association import (
    CONTRADICTS,
    DISCOVERED,
    AssociationPolicy,
    candidate_pairs,
    classify,
    contradiction,
    discover,
    judged,
    negated,
)
from services.core.domain.consolidation import MemorySample

POLICY = AssociationPolicy(min_similarity=0.8, max_links=10, max_per_memory=3, contradiction_similarity=0.85)


def at(angle_degrees: float) -> list[float]:
    """A unit vector in the plane: the cosine of two is the cosine of their angle difference."""
    rad = math.radians(angle_degrees)
    return [math.cos(rad), math.sin(rad)]


def sample(memory_id: str, angle: float, content: str = "", dim_extra: int = 0) -> MemorySample:
    return MemorySample(memory_id, content or f"text {memory_id}", "Context", 0.5, at(angle) + [0.0] * dim_extra)


def test_pairs_above_the_threshold_and_not_connected_best_first():
    samples = [sample("a", 0), sample("b", 10), sample("c", 30), sample("d", 90)]
    pairs = candidate_pairs(samples, set(), POLICY)
    # a-b: cos 10° ≈ .98, b-c: cos 20° ≈ .94, a-c: cos 30° ≈ .87; d is 60° or more from all.
    assert [(x.id, y.id) for x, y, _ in pairs] == [("a", "b"), ("b", "c"), ("a", "c")]
    assert pairs[0][2] > pairs[1][2]
    cosines = {(x.id, y.id): s for x, y, s in candidate_pairs(samples, set(), AssociationPolicy(min_similarity=0.86))}
    assert set(cosines) == {("a", "b"), ("b", "c"), ("a", "c")}
    assert cosines[("a", "b")] > cosines[("b", "c")] > cosines[("a", "c")]
    assert candidate_pairs(samples, {("a", "b")}, POLICY) == candidate_pairs(samples, set(), POLICY)[1:]


def test_the_run_and_each_memory_are_bounded():
    hub = [sample("h", 0)] + [sample(f"s{i}", 1 + i * 0.1) for i in range(6)]
    pairs = candidate_pairs(hub, set(), AssociationPolicy(min_similarity=0.8, max_links=100, max_per_memory=2))
    per: dict[str, int] = {}
    for x, y, _ in pairs:
        per[x.id] = per.get(x.id, 0) + 1
        per[y.id] = per.get(y.id, 0) + 1
    assert max(per.values()) <= 2
    assert len(candidate_pairs(hub, set(), AssociationPolicy(min_similarity=0.8, max_links=2))) == 2


def test_vectors_of_another_dimension_or_zero_are_left_out():
    samples = [sample("a", 0), sample("b", 1), sample("c", 0, dim_extra=1), MemorySample("z", "", "x", 0, [0.0, 0.0])]
    assert [(x.id, y.id) for x, y, _ in candidate_pairs(samples, set(), POLICY)] == [("a", "b")]
    assert candidate_pairs([sample("a", 0)], set(), POLICY) == []


def test_the_contradiction_rule_is_conservative():
    assert negated("I don't use tabs") and negated("We no longer deploy on Fridays") and negated("never again")
    assert not negated("I use tabs for indentation")
    assert contradiction("I use tabs", "I don't use tabs") == "negation"
    assert contradiction("I prefer dark mode", "I avoid dark mode") == "opposing:prefer/avoid"
    assert contradiction("I like vim", "I dislike vim") == "opposing:like/dislike"
    assert contradiction("I like vim", "I like emacs") is None
    assert contradiction("I don't like X", "I never like X") is None  # both negated: they agree


def test_a_link_is_contradicts_only_when_very_similar_and_conflicting():
    a = MemorySample("a", "The team uses Postgres", "Context", 0.5, at(0))
    b = MemorySample("b", "The team stopped using Postgres", "Context", 0.5, at(5))
    link = classify(b, a, 0.95, POLICY)
    assert (link.source_id, link.target_id, link.type, link.reason) == ("a", "b", CONTRADICTS, "negation")
    assert link.confidence <= POLICY.contradiction_confidence
    assert classify(a, b, 0.82, POLICY).type == DISCOVERED  # related, not similar enough to judge a conflict
    same = MemorySample("c", "The team uses Postgres daily", "Context", 0.5, at(1))
    plain = classify(a, same, 0.9, POLICY)
    assert plain.type == DISCOVERED and 0.5 <= plain.confidence <= 0.9
    assert classify(a, same, 1.0, POLICY).confidence == 0.9 and classify(a, same, 0.8, POLICY).confidence == 0.5


def test_a_judge_replaces_the_rule():
    a, b = sample("a", 0, "I use tabs"), sample("b", 2, "I don't use tabs")
    assert judged(a, b, 0.99, "unrelated", POLICY) is None
    assert judged(a, b, 0.99, "related", POLICY).type == DISCOVERED
    assert judged(a, b, 0.99, "contradicts", POLICY).reason == "judge"
    assert judged(a, b, 0.99, None, POLICY).type == CONTRADICTS  # no answer: the rule
    links = discover([a, b, sample("c", 90)], set(), POLICY, judge=lambda x, y, s: "unrelated")
    assert links == []
    assert [link.type for link in discover([a, b], set(), POLICY)] == [CONTRADICTS]
