"""Greedy cosine clustering: groups, minimum and maximum size, summaries."""

from __future__ import annotations

import math

from services.core.domain.clustering import ClusterPolicy, cluster, first_sentence, summarize
from services.core.domain.consolidation import MemorySample

POLICY = ClusterPolicy(min_similarity=0.9, min_size=3, max_size=50, summary_chars=240)


def at(angle: float) -> list[float]:
    rad = math.radians(angle)
    return [math.cos(rad), math.sin(rad), 0.0]


def m(memory_id: str, angle: float, content: str = "", importance: float = 0.5, type_: str = "Context"):
    return MemorySample(memory_id, content or f"note {memory_id}.", type_, importance, at(angle))


def test_similar_memories_form_groups_and_small_groups_are_dropped():
    samples = [m("a1", 0), m("a2", 3), m("a3", 6), m("a4", 9), m("b1", 90), m("b2", 93), m("c1", 180)]
    groups = cluster(samples, POLICY)
    assert [sorted(g.member_ids) for g in groups] == [["a1", "a2", "a3", "a4"]]  # b has 2 < min_size, c alone
    pairs_too = cluster(samples, ClusterPolicy(min_similarity=0.9, min_size=2))
    assert [sorted(g.member_ids) for g in pairs_too] == [["a1", "a2", "a3", "a4"], ["b1", "b2"]]
    assert 0.9 < groups[0].cohesion <= 1.0


def test_the_leader_is_the_most_important_and_members_are_ordered_by_closeness_to_the_centre():
    samples = [m("edge", 20, importance=0.1), m("lead", 0, importance=0.9), m("mid", 10), m("near", 8)]
    [group] = cluster(samples, ClusterPolicy(min_similarity=0.93, min_size=3))
    # From the leader at 0°: 8° and 10° are within cos .93 (21.5°), 20° too; the centre is near 9.5°.
    assert set(group.member_ids) == {"lead", "mid", "near", "edge"}
    assert group.member_ids[0] in ("mid", "near") and group.member_ids[-1] in ("lead", "edge")


def test_groups_are_capped_deterministic_and_ignore_bad_vectors():
    many = [m(f"x{i:02d}", i * 0.1) for i in range(12)] + [MemorySample("zero", "", "Context", 0.5, [0.0, 0.0, 0.0])]
    policy = ClusterPolicy(min_similarity=0.9, min_size=3, max_size=5)
    groups = cluster(many, policy)
    assert [g.size for g in groups] == [5, 5]  # 12 = 5 + 5 + 2 (dropped)
    assert groups == cluster(list(reversed(many)), policy)
    assert all("zero" not in g.member_ids for g in groups)
    assert cluster([], POLICY) == [] and cluster(many[:2], POLICY) == []


def test_the_summary_names_the_common_words_and_the_central_members_first_sentence():
    members = [
        m("a", 0, "Deploys run through the staging pipeline first. Then production.", type_="Pattern"),
        m("b", 1, "The staging pipeline blocks deploys on failing tests.", type_="Pattern"),
        m("c", 2, "Hotfix deploys skip staging pipeline checks.", type_="Decision"),
    ]
    text, dominant = summarize(members, members[0], POLICY)
    assert dominant == "Pattern"
    assert text == "3 Pattern memories on deploys, pipeline, staging: Deploys run through the staging pipeline first."
    short, _ = summarize(members, members[0], ClusterPolicy(summary_chars=30))
    assert len(short) <= 30 and short.endswith("…")
    assert first_sentence("  One.\nTwo. ") == "One." and first_sentence("no end") == "no end"
