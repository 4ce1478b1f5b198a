"""Recall's context components: the speaker a query names, and the
neighbourhood of a candidate (the best first-pass score written close to it)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.core.domain.recall_context import Timed, neighbourhood, speaker_named, speaker_of
from services.core.domain.recall_ranking import Candidate, order, with_neighbourhood
from tests.factories import memory_at
from tests.unit.test_recall_domain import policy

NOW = datetime(2026, 3, 18, 15, 30, tzinfo=UTC)


def test_the_speaker_comes_from_metadata_then_the_content_label():
    assert speaker_of(memory_at("a", NOW, content="Caroline: I went to a support group")) == "Caroline"
    assert speaker_of(memory_at("b", NOW, content="Dr Ann Lee: take two")) == "Dr Ann Lee"
    assert speaker_of(memory_at("c", NOW, content="Bob: hi", metadata={"speaker": "Robert"})) == "Robert"
    # A speaker filed as a tag, as AutoMem's LoCoMo harness files it, when the content has no label.
    tagged = memory_at("g", NOW, content="I went to a support group", tags=["locomo", "speaker:caroline"])
    assert speaker_of(tagged) == "caroline"
    assert speaker_of(memory_at("h", NOW, content="take two", tags=["author:dr-ann_lee"])) == "dr ann lee"
    assert speaker_of(memory_at("i", NOW, content="Bob: hi", tags=["speaker:robert"])) == "robert"  # before the label
    assert speaker_of(memory_at("j", NOW, content="take two", tags=["speaker:"])) == ""  # an empty name says nothing
    # A transcript's bracketed stamp before the label.
    assert speaker_of(memory_at("s", NOW, content="[1:56 pm on 8 May, 2023] Caroline: hi")) == "Caroline"
    assert speaker_of(memory_at("t", NOW, content="(2023-05-08 13:56) Dr Ann Lee: take two")) == "Dr Ann Lee"
    # No label: a sentence with a colon later, a lower-case start, a label of four words.
    assert speaker_of(memory_at("d", NOW, content="We chose this: Postgres")) == ""
    assert speaker_of(memory_at("e", NOW, content="note: use Postgres")) == ""
    assert speaker_of(memory_at("f", NOW, content="One Two Three Four: x")) == ""
    assert speaker_of(memory_at("u", NOW, content="[draft] we chose this: Postgres")) == ""
    assert speaker_of(memory_at("g", NOW, content="x", metadata={"speaker": 3})) == ""


def test_a_query_naming_the_speaker_scores_one():
    turn = memory_at("a", NOW, content="Melanie: I ran a charity race")
    assert speaker_named(turn, ["when", "did", "melanie", "run"]) == 1.0
    assert speaker_named(turn, ["when", "did", "caroline", "run"]) == 0.0
    assert speaker_named(memory_at("b", NOW, content="ran a race"), ["melanie"]) == 0.0


def test_the_neighbourhood_is_the_best_score_within_the_window():
    items = [Timed(0, 0.2), Timed(10, 0.9), Timed(100, 0.1), Timed(25, 0.3), Timed(1000, 0.4)]
    assert neighbourhood(items, 15) == [0.9, 0.9, 0.1, 0.9, 0.4]
    assert neighbourhood(items, 5) == [0.2, 0.9, 0.1, 0.3, 0.4]
    assert neighbourhood(items, 0) == [0.2, 0.9, 0.1, 0.3, 0.4]
    assert neighbourhood([], 10) == []


@given(
    st.lists(st.tuples(st.integers(0, 50), st.floats(0, 1, allow_nan=False)), max_size=30),
    st.integers(0, 20),
)
def test_the_neighbourhood_agrees_with_the_plain_definition(pairs, seconds):
    items = [Timed(float(t), s) for t, s in pairs]
    plain = [max(o.score for o in items if abs(o.timestamp - i.timestamp) <= seconds) for i in items]
    assert neighbourhood(items, seconds) == plain


def _candidate(memory_id: str, minutes: float, final: float) -> Candidate:
    memory = memory_at(memory_id, NOW + timedelta(minutes=minutes), content=f"content {memory_id}")
    candidate = Candidate(memory_id, memory=memory, final=final)
    candidate.components = {"neighbourhood": 0.0}
    return candidate


def test_a_turn_beside_a_strong_match_overtakes_a_lone_one():
    pol = policy(neighbourhood_seconds=1800.0)
    weights = {"neighbourhood": 0.5}
    # "Yes, it was amazing!" (weak alone) sits beside the strong match; the lone one is days away.
    strong, answer, lone = _candidate("strong", 0, 0.8), _candidate("answer", 1, 0.3), _candidate("lone", 5000, 0.35)
    candidates = [strong, answer, lone]
    with_neighbourhood(candidates, pol, weights, search=True)
    assert answer.components["neighbourhood"] == pytest.approx(0.8)
    assert answer.final == pytest.approx((0.3 + 0.5 * 0.8) / 1.5)
    # The best of its neighbourhood keeps its score: no score grows past the best near it.
    assert strong.final == pytest.approx(0.8)
    assert lone.final == pytest.approx(0.35)
    assert [c.id for c in order(candidates, "score")] == ["strong", "answer", "lone"]


@pytest.mark.parametrize(("seconds", "weight", "search"), [(0.0, 0.5, True), (1800.0, 0.0, True), (1800.0, 0.5, False)])
def test_no_weight_no_window_or_no_query_leaves_the_scores(seconds, weight, search):
    candidates = [_candidate("strong", 0, 0.8), _candidate("answer", 1, 0.3)]
    with_neighbourhood(candidates, policy(neighbourhood_seconds=seconds), {"neighbourhood": weight}, search=search)
    assert [c.final for c in candidates] == [0.8, 0.3]
    assert all(c.components["neighbourhood"] == 0.0 for c in candidates)


def test_a_disputed_best_is_not_overtaken_by_what_it_lifts_and_is_lifted_less():
    pol = policy(neighbourhood_seconds=1800.0, disputed_weight=0.5)
    best, near, disputed = _candidate("best", 0, 0.4), _candidate("near", 1, 0.3), _candidate("disputed", 2, 0.2)
    # Their finals already carry the 0.5, as score() leaves them.
    best.memory.trust_state = disputed.memory.trust_state = "disputed"
    with_neighbourhood([best, near, disputed], pol, {"neighbourhood": 1.0}, search=True)
    assert best.final == pytest.approx(0.4)  # the best of its neighbourhood keeps its score
    assert near.final == pytest.approx((0.3 + 0.4) / 2)  # lifted towards it, never past it
    assert disputed.final == pytest.approx((0.2 + 0.5 * 0.4) / 1.5)  # a disputed memory is lifted less
    assert max(near.final, disputed.final) < best.final


def test_with_adjacent_the_neighbourhood_is_the_turns_around_it():
    # One session: seven turns sharing a timestamp, ordered by when each was stored.
    scores = [0.1, 0.2, 0.9, 0.1, 0.1, 0.1, 0.3]
    items = [Timed(100.0, s, order=float(i)) for i, s in enumerate(scores)]
    assert neighbourhood(items, 60, adjacent=0) == [0.9] * 7  # the whole stretch
    assert neighbourhood(items, 60, adjacent=2) == [0.9, 0.9, 0.9, 0.9, 0.9, 0.3, 0.3]
    assert neighbourhood(items, 60, adjacent=1) == [0.2, 0.9, 0.9, 0.9, 0.1, 0.3, 0.3]
    # The items' own order does not matter, the stored order does.
    places = (3, 6, 0, 2, 5, 1, 4)
    expected = [0.9, 0.9, 0.9, 0.9, 0.9, 0.3, 0.3]
    assert neighbourhood([items[i] for i in places], 60, adjacent=2) == [expected[i] for i in places]


def test_an_adjacent_item_outside_the_window_does_not_count():
    items = [Timed(0.0, 0.9), Timed(10_000.0, 0.2), Timed(10_030.0, 0.1)]
    assert neighbourhood(items, 1800, adjacent=2) == [0.9, 0.2, 0.2]


@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 50), st.floats(0, 1)), min_size=1, max_size=30),
    st.integers(1, 4),
    st.sampled_from([0.0, 1.0, 3.0]),
)
def test_the_adjacent_neighbourhood_agrees_with_the_plain_definition(triples, adjacent, seconds):
    items = [Timed(float(t), s, order=float(o)) for t, o, s in triples]
    ranked = sorted(range(len(items)), key=lambda i: (items[i].timestamp, items[i].order))
    place = {index: p for p, index in enumerate(ranked)}
    expected = [
        max(
            other.score
            for j, other in enumerate(items)
            if abs(place[j] - place[i]) <= adjacent and abs(other.timestamp - item.timestamp) <= seconds
        )
        for i, item in enumerate(items)
    ]
    assert neighbourhood(items, seconds, adjacent=adjacent) == expected
