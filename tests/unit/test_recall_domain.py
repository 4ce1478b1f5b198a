"""Ranked recall, pure (services.core.domain.recall_text, recall_request and
recall_ranking): parameters, candidate scope, merging, scoring,
de-duplication, ordering, diversity and the state pass's stand-in."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from services.core.domain.context_hints import context_profile, detect_language
from services.core.domain.decompose import DecomposePolicy, decompose, query_entities
from services.core.domain.errors import InvalidArgument
from services.core.domain.model import Memory
from services.core.domain.recall_assembly import append_new, entity_names, per_query_cap
from services.core.domain.recall_ranking import (
    ARMS,
    COMPONENTS,
    Candidate,
    dedupe,
    diversify,
    fingerprint,
    merge,
    order,
    recency,
    relevance,
    score,
    source_of,
    stand_in,
    weights_for,
)
from services.core.domain.recall_request import RecallPolicy, Scope, build_request, clean_tags, in_scope
from services.core.domain.recall_text import bm25, common_words, stem, tokens
from services.core.domain.score_floor import adaptive_floor
from services.core.domain.tags import tag_prefixes
from services.core.domain.timewindow import Window
from services.core.settings import Settings

NOW = datetime(2026, 3, 18, 15, 30, tzinfo=UTC)
WEEK_AGO = NOW - timedelta(days=7)

#: The recall weights of settings, spelled out so the tests do not depend on the environment.
RECALL_WEIGHTS = {
    "vector": 0.45, "keyword": 0.25, "metadata": 0.05, "tag": 0.05, "exact": 0.05, "relation": 0.1,
    "importance": 0.03, "confidence": 0.01, "recency": 0.02, "trust": 0.02, "context": 0.1, "relevance": 0.0,
    "speaker": 0.1, "neighbourhood": 0.0, "related": 0.1,
}  # fmt: skip
BROWSE_WEIGHTS = {
    "vector": 0.3, "keyword": 0.1, "metadata": 0.03, "tag": 0.05, "exact": 0.02, "relation": 0.05,
    "importance": 0.15, "confidence": 0.02, "recency": 0.3, "trust": 0.03, "context": 0.1, "relevance": 0.0,
    "speaker": 0.0, "neighbourhood": 0.0, "related": 0.0,
}  # fmt: skip


def recall_policy() -> RecallPolicy:
    """The recall policy of the default settings."""
    settings = Settings(_env_file=None)
    return settings.recall.policy(settings.limits)


def policy(**changes) -> RecallPolicy:
    values = {
        "default_limit": 5,
        "max_limit": 100,
        "candidate_multiplier": 3,
        "candidate_min": 30,
        "shortlist_min": 30,
        "candidate_cap": 250,
        "relation_limit": 5,
        "expansion_limit": 10,
        "expand_min_strength": 0.0,
        "expand_min_importance": 0.0,
        "max_hops": 5,
        "recency_decay_rate": 0.005,
        "diversity_factor": 0.15,
        "weights": {"recall": RECALL_WEIGHTS, "browse": BROWSE_WEIGHTS},
        "source_trust": {"gmail": 0.95, "slack": 0.9, "manual": 0.7},
        "default_trust": 0.7,
        "keyword_max_df_ratio": 0.02,
        "keyword_min_df": 200,
        "keyword_max_df": 2000,
        "keyword_scan": 2000,
        "keyword_candidates": 100,
        "bm25_k1": 1.2,
        "bm25_b": 0.75,
        "related_threshold": 0.4,
        "related_per_word": 8,
        # What RecallPolicy's own defaults were before the settings became their one source.
        "max_queries": 10,
        "max_query_words": 64,
        "max_priority_ids": 100,
        "adaptive_floor": False,
        "adaptive_floor_min_results": 3,
        "adaptive_floor_gap": 0.25,
        "context_inject_limit": 3,
        "context_keyword_score": 0.5,
        "decompose": DecomposePolicy(),
        "related_max_depth": 3,
        "relevance_unscored": 1.0,
        "disputed_weight": 1.0,
        "fiction_weight": 1.0,
        "neighbourhood_seconds": 0.0,
        "neighbourhood_adjacent": 0,
        "nameless_query_share": 0.0,
        "tag_limits": None,
    }
    values.update(changes)
    return RecallPolicy(**values)


POLICY = policy()


def mem(memory_id: str = "m1", content: str | None = None, **fields) -> Memory:
    """A memory of tenant acme stamped a week before NOW; tag_prefixes follow the tags."""
    values = {
        "id": memory_id,
        "tenant": "acme",
        "content": content if content is not None else f"content of {memory_id}",
        "type": "Context",
        "confidence": 0.8,
        "importance": 0.5,
        "timestamp": WEEK_AGO,
        "t_valid": WEEK_AGO,
        "updated_at": WEEK_AGO,
        "last_accessed": WEEK_AGO,
        "recorded_at": WEEK_AGO,
    }
    values.update(fields)
    values.setdefault("tag_prefixes", tag_prefixes(values.get("tags", [])))
    return Memory(**values)


def req(**params):
    """build_request with POLICY, tenant acme, NOW, current mode and no window unless given."""
    base = {"tenant": "acme", "now": NOW, "history": False, "as_of": None, "window": Window()}
    base.update(params)
    return build_request(POLICY, **base)


def cand(memory: Memory, final: float = 0.0, **fields) -> Candidate:
    return Candidate(memory.id, memory=memory, final=final, **fields)


# build_request -------------------------------------------------------------------------------------------


def test_build_request_defaults():
    request = req(queries=["postgres"])
    assert request.queries == ("postgres",)
    assert request.embedding is None
    assert request.limit == 5
    assert request.sort == "score"
    assert request.intent == "recall"
    assert request.diversity_factor == 0.15
    assert request.relation_limit == 5
    assert request.expansion_limit == 10
    assert request.expand_min_strength == 0.0
    assert request.expand_min_importance == 0.0
    assert request.min_score is None
    assert request.recency_bias is None
    assert request.scope == Scope(tenant="acme", at=NOW)
    assert request.scope.tag_mode == "any"
    assert request.scope.tag_match == "prefix"
    assert request.has_query


@pytest.mark.parametrize(("limit", "expected"), [(None, 5), (0, 5), (-3, 5), (1, 1), (7, 7), (100, 100), (1000, 100)])
def test_limit_defaults_and_is_capped(limit, expected):
    assert req(limit=limit).limit == expected


@pytest.mark.parametrize(
    ("value", "relation", "expansion"), [(None, 5, 10), (0, 5, 10), (-1, 5, 10), (3, 3, 3), (500, 100, 100)]
)
def test_relation_and_expansion_limits_default_and_are_capped(value, relation, expansion):
    request = req(relation_limit=value, expansion_limit=value)
    assert (request.relation_limit, request.expansion_limit) == (relation, expansion)


def test_the_default_limit_and_cap_come_from_the_policy():
    request = build_request(
        policy(default_limit=8, max_limit=20), tenant="acme", now=NOW, history=False, as_of=None, window=Window()
    )
    assert request.limit == 8
    request = build_request(
        policy(default_limit=8, max_limit=20), tenant="acme", now=NOW, history=False, as_of=None, window=Window(),
        limit=50,
    )  # fmt: skip
    assert request.limit == 20


@pytest.mark.parametrize(
    ("params", "sort"),
    [
        ({}, "score"),
        ({"window": Window(start=WEEK_AGO)}, "time_desc"),
        ({"window": Window(end=NOW)}, "time_desc"),
        ({"window": Window(start=WEEK_AGO), "queries": ["postgres"]}, "score"),
        ({"window": Window(start=WEEK_AGO), "embedding": [0.1, 0.2]}, "score"),
        ({"window": Window(start=WEEK_AGO), "queries": ["  "]}, "time_desc"),
        ({"window": Window(start=WEEK_AGO), "embedding": []}, "time_desc"),
        ({"window": Window(start=WEEK_AGO), "sort": "score"}, "score"),
        ({"sort": "TIME_ASC"}, "time_asc"),
        ({"sort": " updated_desc "}, "updated_desc"),
        ({"sort": ""}, "score"),
    ],
)
def test_sort_defaults_to_time_desc_for_a_window_without_a_query(params, sort):
    assert req(**params).sort == sort


def test_an_empty_embedding_is_no_query():
    request = req(embedding=[])
    assert request.embedding is None
    assert not request.has_query


def test_an_embedding_alone_is_a_query():
    request = req(embedding=[0.5, 0.5])
    assert request.embedding == [0.5, 0.5]
    assert request.has_query


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"tag_mode": "some"}, "tag_mode"),
        ({"tag_match": "fuzzy"}, "tag_match"),
        ({"sort": "relevance"}, "sort"),
        ({"intent": "explore"}, "intent"),
        ({"diversity_factor": 1.5}, "diversity_factor"),
        ({"diversity_factor": -0.1}, "diversity_factor"),
        ({"diversity_factor": math.nan}, "diversity_factor"),
        ({"min_score": math.nan}, "min_score"),
        ({"min_score": math.inf}, "min_score"),
        ({"recency_bias": -0.5}, "recency_bias"),
        ({"recency_bias": math.nan}, "recency_bias"),
        ({"recency_bias": math.inf}, "recency_bias"),
        ({"expand_min_strength": 2.0}, "expand_min_strength"),
        ({"expand_min_importance": -1.0}, "expand_min_importance"),
    ],
)
def test_invalid_parameters_raise_naming_the_field(params, field):
    with pytest.raises(InvalidArgument) as caught:
        req(**params)
    assert caught.value.field == field
    assert caught.value.details["field"] == field
    assert field in caught.value.message


@pytest.mark.parametrize(
    ("params", "attribute", "expected"),
    [
        ({"tag_mode": "ALL"}, "tag_mode", "all"),
        ({"tag_match": " Exact "}, "tag_match", "exact"),
        ({"intent": "Browse"}, "intent", "browse"),
        ({"diversity_factor": 0.0}, "diversity_factor", 0.0),
        ({"diversity_factor": 1.0}, "diversity_factor", 1.0),
        ({"min_score": -0.2}, "min_score", -0.2),
        ({"min_score": 0.35}, "min_score", 0.35),
        ({"recency_bias": 0.0}, "recency_bias", 0.0),
        ({"recency_bias": 3.0}, "recency_bias", 3.0),
        ({"expand_min_strength": 0.4}, "expand_min_strength", 0.4),
        ({"expand_min_importance": 1.0}, "expand_min_importance", 1.0),
    ],
)
def test_valid_parameters_are_normalised(params, attribute, expected):
    request = req(**params)
    target = request.scope if attribute.startswith("tag_") else request
    assert getattr(target, attribute) == expected


def test_tags_are_lowercased_split_on_commas_and_deduped():
    request = req(
        tags=["Project:A, Foo", "foo", " ", "BAR,,bar"],
        exclude_tags=["Old, ARCHIVE", "old"],
        context_tags=["Team:X,team:x"],
        context_types=[" Decision ", "", "PATTERN"],
    )
    assert request.scope.tags == ("project:a", "foo", "bar")
    assert request.scope.exclude_tags == ("old", "archive")
    assert request.context_tags == ("team:x",)
    assert request.context_types == ("decision", "pattern")


def test_clean_tags_keeps_first_seen_order():
    assert clean_tags(["b", "A", "a,c", "B"]) == ("b", "a", "c")
    assert clean_tags([]) == ()


def test_queries_and_priority_ids_are_trimmed_and_deduped():
    x, y = "0b0c5d6e-0000-4000-8000-000000000001", "0b0c5d6e-0000-4000-8000-000000000002"
    request = req(queries=[" postgres ", "postgres", "", "  ", "mongo"], priority_ids=[x, "", y.upper(), x])
    assert request.queries == ("postgres", "mongo")
    assert request.priority_ids == (x, y)  # canonical form


def test_scope_at_is_as_of_when_given_and_history_has_no_current_moment():
    as_of = NOW - timedelta(days=30)
    window = Window(start=WEEK_AGO)
    request = req(as_of=as_of, history=True, window=window, tag_mode="all")
    assert request.scope.at == as_of
    assert request.scope.as_of == as_of
    assert request.scope.history
    assert request.scope.current_at is None
    assert request.scope.window == window
    current = req()
    assert current.scope.at == NOW
    assert current.scope.current_at == NOW


def test_candidates_per_arm_is_bounded():
    assert POLICY.candidates_per_arm(5) == 30  # at least candidate_min
    assert POLICY.candidates_per_arm(20) == 60  # limit x multiplier
    assert POLICY.candidates_per_arm(100) == 250  # at most candidate_cap


def test_the_shortlist_is_sized_apart_from_the_arms():
    deep = replace(POLICY, candidate_min=100, shortlist_min=40)
    assert deep.candidates_per_arm(5) == 100  # the arms fetch deep ...
    assert deep.shortlist_size(5) == 40  # ... and 40 of their pool are read and scored
    assert deep.shortlist_size(20) == 60  # limit x multiplier
    assert deep.shortlist_size(100) == 250  # at most candidate_cap


def test_settings_policy_has_a_weight_for_every_component():
    settings_policy = recall_policy()
    for intent in ("recall", "browse"):
        assert set(settings_policy.weights[intent]) == set(COMPONENTS)


# tokens, stem, coverage ----------------------------------------------------------------------------------


def test_tokens_lowercase_and_drop_stopwords_and_punctuation():
    assert tokens("The PostgreSQL, and MongoDB! v16 is it?") == ["postgresql", "mongodb", "v16"]
    assert tokens("the and of") == []


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("deploy", "deployed"),
        ("deploy", "deploying"),
        ("test", "tests"),
        ("match", "matches"),
        ("memory", "memories"),
        ("query", "queries"),
        ("database", "databases"),
        ("cache", "cached"),
        ("cache", "caching"),
        ("store", "stored"),
        ("class", "classes"),
        ("access", "accesses"),
        ("study", "studied"),
    ],
)
def test_stem_matches_plural_and_tense_variants(a, b):
    assert stem(a) == stem(b)


@pytest.mark.parametrize("word", ["go", "is", "was", "bus", "use", "yes"])
def test_stem_leaves_short_words_alone(word):
    assert stem(word) == word


def test_stem_does_not_merge_unrelated_words():
    assert stem("postgres") != stem("mongo")
    assert stem("class") != stem("clas")


def test_merge_normalise_divides_by_the_arms_best():
    pool: dict[str, Candidate] = {}
    merge(pool, "keyword", [("a", 4.0), ("b", 2.0), ("c", 0.0)], normalise=True)
    assert pool["a"].arms == {"keyword": 1.0}
    assert pool["b"].arms == {"keyword": 0.5}
    assert pool["c"].arms == {"keyword": 0.0}


def test_merge_without_normalise_keeps_scores_clamped_to_unit():
    pool: dict[str, Candidate] = {}
    merge(pool, "vector", [("a", 0.42), ("b", 1.3), ("c", -0.2)])
    assert pool["a"].arms["vector"] == 0.42
    assert pool["b"].arms["vector"] == 1.0
    assert pool["c"].arms["vector"] == 0.0


def test_merge_keeps_the_best_score_per_arm_and_every_arm():
    pool: dict[str, Candidate] = {}
    merge(pool, "vector", [("a", 0.4)])
    merge(pool, "vector", [("a", 0.7)])
    merge(pool, "vector", [("a", 0.5)])
    merge(pool, "tag", [("a", 3.0), ("b", 6.0)], normalise=True)
    assert pool["a"].arms == {"vector": 0.7, "tag": 0.5}
    assert pool["b"].arms == {"tag": 1.0}


def test_merge_normalises_each_batch_by_its_own_best():
    pool: dict[str, Candidate] = {}
    merge(pool, "keyword", [("a", 10.0), ("b", 5.0)], normalise=True)
    merge(pool, "keyword", [("b", 1.0)], normalise=True)  # another query, where b is the best hit
    assert pool["b"].arms["keyword"] == 1.0


def test_merge_with_all_zero_scores_and_nothing():
    pool: dict[str, Candidate] = {}
    merge(pool, "keyword", [("a", 0.0)], normalise=True)
    assert pool["a"].arms == {"keyword": 0.0}
    merge(pool, "keyword", [])
    assert list(pool) == ["a"]


def test_candidate_add_keeps_the_maximum():
    candidate = Candidate("a")
    candidate.add("vector", 0.3)
    candidate.add("vector", 0.1)
    assert candidate.arms == {"vector": 0.3}


# match_type and match_score ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "match_type"),
    [
        ({"arms": {"vector": 0.5, "keyword": 0.9}}, "keyword"),
        ({"arms": {"tag": 0.7, "vector": 0.7, "keyword": 0.7}}, "vector"),  # ties: the earlier arm
        ({"arms": {"tag": 0.6, "metadata": 0.6}}, "metadata"),
        ({"arms": {"vector": 0.9}, "via": "priority"}, "priority"),
        ({"arms": {"vector": 0.9}, "via": "relation"}, "vector"),
        ({"via": "relation"}, "relation"),
        ({"via": "entity_expansion"}, "entity_expansion"),
        ({"via": "priority"}, "priority"),
        ({}, "recent"),
        ({"arms": {"vector": 0.9}, "state_replaces": "old"}, "state_replacement"),
        ({"via": "relation", "state_replaces": "old"}, "state_replacement"),
    ],
)
def test_match_type(fields, match_type):
    assert Candidate("a", **fields).match_type == match_type


def test_arms_are_listed_in_match_priority_order():
    assert ARMS == ("vector", "keyword", "metadata", "tag")


@pytest.mark.parametrize(
    ("fields", "match_score"),
    [
        ({"arms": {"vector": 0.5, "keyword": 0.9}, "final": 0.3}, 0.9),
        ({"via": "relation", "relation": 0.6, "final": 0.2}, 0.6),
        ({"via": "entity_expansion", "relation": 0.4, "final": 0.2}, 0.4),
        ({"via": "recent", "relation": 0.4, "final": 0.2}, 0.2),
        ({"via": "priority", "final": 0.25}, 0.25),
    ],
)
def test_match_score(fields, match_score):
    assert Candidate("a", **fields).match_score == match_score


# score ---------------------------------------------------------------------------------------------------


def scored(memory: Memory, request=None, arms=None, relation: float = 0.0, weights=None, pol=POLICY) -> Candidate:
    request = request or req(queries=["unrelated words"])
    candidate = Candidate(memory.id, arms=dict(arms or {}), memory=memory, relation=relation)
    score(candidate, request, pol, weights if weights is not None else weights_for(pol, request))
    return candidate


def test_components_are_present_for_every_name_in_order():
    candidate = scored(mem())
    assert list(candidate.components) == list(COMPONENTS)


def test_the_final_score_is_the_weighted_sum_of_the_components():
    memory = mem(content="chose postgres for acid", tags=["db"], metadata={"source": "slack"}, importance=0.9)
    request = req(queries=["postgres acid"], context_types=["context"])
    candidate = scored(memory, request, arms={"vector": 0.8, "keyword": 0.6, "metadata": 0.3, "tag": 0.2}, relation=0.5)
    expected = sum(RECALL_WEIGHTS[name] * candidate.components[name] for name in COMPONENTS)
    assert candidate.final == pytest.approx(expected, abs=1e-5)
    assert candidate.components["vector"] == 0.8
    assert candidate.components["metadata"] == 0.3
    assert candidate.components["relation"] == 0.5
    assert candidate.components["importance"] == 0.9
    assert candidate.components["confidence"] == 0.8
    assert candidate.components["trust"] == 0.9
    assert candidate.components["context"] == 1.0


def test_relevance_is_the_decayed_score_or_the_unscored_value():
    assert relevance(mem(relevance_score=0.42), POLICY) == 0.42
    assert relevance(mem(), POLICY) == 1.0  # never decayed: nothing has faded
    assert relevance(mem(), policy(relevance_unscored=0.5)) == 0.5
    assert scored(mem(relevance_score=0.42)).components["relevance"] == 0.42


def test_the_relevance_weight_defaults_to_zero_and_changes_nothing():
    for intent in ("recall", "browse"):
        assert recall_policy().weights[intent]["relevance"] == 0.0
    faded, fresh = mem("faded", relevance_score=0.2), mem("fresh", relevance_score=0.9)
    assert scored(faded, arms={"vector": 0.6}).final == scored(fresh, arms={"vector": 0.6}).final


def test_a_relevance_weight_reorders_memories_that_differ_only_in_relevance():
    weighted = policy(weights={"recall": {**RECALL_WEIGHTS, "relevance": 0.5}, "browse": BROWSE_WEIGHTS})
    # The faded memory matches a little better; with the weight, the fresher one wins.
    faded = scored(mem("faded", relevance_score=0.2), arms={"vector": 0.62}, pol=weighted)
    fresh = scored(mem("fresh", relevance_score=0.9), arms={"vector": 0.6}, pol=weighted)
    plain = [scored(mem("faded", relevance_score=0.2), arms={"vector": 0.62}),
             scored(mem("fresh", relevance_score=0.9), arms={"vector": 0.6})]  # fmt: skip
    assert [c.id for c in order(plain, "score")] == ["faded", "fresh"]
    assert [c.id for c in order([faded, fresh], "score")] == ["fresh", "faded"]


def test_weights_come_from_the_policy_and_the_intent():
    memory = mem(importance=1.0)
    recall_request, browse_request = req(queries=["x"]), req(queries=["x"], intent="browse")
    as_recall = scored(memory, recall_request, arms={"vector": 0.5})
    as_browse = scored(memory, browse_request, arms={"vector": 0.5})
    assert as_recall.components == as_browse.components
    assert as_recall.final == pytest.approx(sum(RECALL_WEIGHTS[n] * v for n, v in as_recall.components.items()))
    assert as_browse.final == pytest.approx(sum(BROWSE_WEIGHTS[n] * v for n, v in as_browse.components.items()))
    assert as_recall.final != pytest.approx(as_browse.final)


def test_only_weighted_components_count():
    candidate = scored(mem(importance=0.7), weights={"importance": 1.0})
    assert candidate.final == pytest.approx(0.7)
    assert scored(mem(importance=0.7), weights={}).final == 0.0


def test_recency_is_exp_of_minus_rate_times_age_in_days():
    memory = mem(timestamp=NOW - timedelta(days=10))
    assert recency(memory, NOW, 0.005) == pytest.approx(math.exp(-0.05))
    assert recency(memory, NOW, 0.1) == pytest.approx(math.exp(-1.0))
    assert recency(mem(timestamp=NOW - timedelta(hours=12)), NOW, 0.5) == pytest.approx(math.exp(-0.25))
    assert recency(mem(timestamp=NOW), NOW, 0.005) == 1.0
    assert recency(mem(timestamp=NOW + timedelta(days=3)), NOW, 0.005) == 1.0


def test_the_recency_component_uses_the_policy_rate_and_the_scope_moment():
    memory = mem(timestamp=NOW - timedelta(days=100))
    assert scored(memory).components["recency"] == pytest.approx(math.exp(-0.5), abs=1e-6)
    fast = policy(recency_decay_rate=0.01)
    assert scored(memory, pol=fast).components["recency"] == pytest.approx(math.exp(-1.0), abs=1e-6)
    # As of 50 days ago the memory was 50 days old.
    as_of = req(queries=["x"], as_of=NOW - timedelta(days=50))
    assert scored(memory, as_of).components["recency"] == pytest.approx(math.exp(-0.25), abs=1e-6)


def test_recency_bias_replaces_the_recency_weight_only():
    request = req(queries=["x"], recency_bias=0.8)
    weights = weights_for(POLICY, request)
    assert weights["recency"] == 0.8
    assert {k: v for k, v in weights.items() if k != "recency"} == {
        k: v for k, v in RECALL_WEIGHTS.items() if k != "recency"
    }
    assert POLICY.weights["recall"]["recency"] == 0.02  # the policy is untouched
    assert weights_for(POLICY, req(queries=["x"]))["recency"] == 0.02
    assert weights_for(POLICY, req(queries=["x"], recency_bias=0.0))["recency"] == 0.0


def test_recency_bias_moves_the_final_score_by_the_recency_component():
    memory = mem(timestamp=NOW - timedelta(days=20))
    plain = scored(memory, req(queries=["x"]))
    biased = scored(memory, req(queries=["x"], recency_bias=1.0))
    delta = (1.0 - 0.02) * plain.components["recency"]
    assert biased.final - plain.final == pytest.approx(delta, abs=1e-6)


@pytest.mark.parametrize(
    ("memory_fields", "params", "context"),
    [
        ({"type": "Decision"}, {"context_types": ["decision"]}, 1.0),
        ({"type": "Decision"}, {"context_types": ["DECISION"]}, 1.0),
        ({"type": "Decision"}, {"context_types": ["pattern"]}, 0.0),
        ({"tags": ["project:memgrid:api"]}, {"context_tags": ["project"]}, 1.0),
        ({"tags": ["project:memgrid:api"]}, {"context_tags": ["Project:MemGrid"]}, 1.0),
        ({"tags": ["project:memgrid:api"]}, {"context_tags": ["memgrid"]}, 0.0),
        ({"tags": ["project:memgrid"]}, {"context_tags": ["project:memgrid:api"]}, 0.0),
        ({"tags": ["project"]}, {}, 0.0),
    ],
)
def test_context_boost_by_type_and_by_tag_prefix(memory_fields, params, context):
    candidate = scored(mem(**memory_fields), req(queries=["x"], **params))
    assert candidate.components["context"] == context


@pytest.mark.parametrize(
    ("metadata", "trust"),
    [
        ({"source": "gmail"}, 0.95),
        ({"source": "Slack"}, 0.9),
        ({"source": "carrier-pigeon"}, 0.7),
        ({}, 0.7),
        ({"source": 42}, 0.7),
        ({"source": None}, 0.7),
    ],
)
def test_trust_comes_from_the_source_table_with_a_default(metadata, trust):
    assert scored(mem(metadata=metadata)).components["trust"] == trust
    assert POLICY.trust(mem(metadata=metadata)) == trust


def test_the_default_trust_is_the_policys():
    assert policy(default_trust=0.3).trust(mem(metadata={"source": "fax"})) == 0.3


@pytest.mark.parametrize(
    ("query", "exact"),
    [
        ("PostgreSQL over  MongoDB", 1.0),
        ("postgresql over mongodb", 1.0),
        ("  Chose PostgreSQL  ", 1.0),
        ("mongodb over postgresql", 0.0),
        ("mysql", 0.0),
    ],
)
def test_exact_match_ignores_case_and_whitespace(query, exact):
    memory = mem(content="Chose PostgreSQL\nover   MongoDB for ACID")
    assert scored(memory, req(queries=[query])).components["exact"] == exact


def test_exact_match_with_any_of_several_queries():
    memory = mem(content="Chose PostgreSQL for ACID")
    assert scored(memory, req(queries=["mysql", "for acid"])).components["exact"] == 1.0
    assert scored(memory, req(embedding=[0.1, 0.2])).components["exact"] == 0.0


def test_keyword_component_is_the_arms_bm25_score():
    memory = mem(content="Deployed the Kubernetes operator")
    request = req(queries=["deploy kubernetes cluster"])
    assert scored(memory, request, arms={"keyword": 0.6}).components["keyword"] == pytest.approx(0.6)


def test_bm25_prefers_rare_words_repeated_terms_and_short_texts():
    texts = {
        "rare": "the studio opening party",
        "common": "gina said hello to jon",
        "both": "gina opening her studio",
        "long": "gina opening her studio after a very long and winding story about many other things",
        "none": "nothing here",
    }
    df = {"gina": 900, "studio": 12, "opening": 40}
    scores = bm25(["gina", "studio", "opening"], texts, df, 1000, k1=1.2, b=0.75)
    assert scores["none"] == 0.0
    assert scores["both"] > scores["rare"] > scores["common"] > 0  # rare words weigh most
    assert scores["both"] > scores["long"]  # length normalisation
    plural = bm25(["studio"], {"a": "two studios", "b": "one studio"}, {"studio": 5}, 100, k1=1.2, b=0.75)
    assert plural["a"] == pytest.approx(plural["b"])  # stemmed alike
    assert bm25([], texts, df, 1000, k1=1.2, b=0.75) == {}
    assert bm25(["gina"], {}, df, 1000, k1=1.2, b=0.75) == {}


def test_keyword_component_is_zero_without_a_keyword_hit():
    memory = mem(content="deploy kubernetes cluster")
    assert scored(memory, req(queries=["deploy kubernetes cluster"]), arms={"vector": 0.9}).components["keyword"] == 0


def test_tag_component_is_query_words_in_tag_words_or_the_tag_arm():
    memory = mem(tags=["infra:kubernetes", "ops"])
    request = req(queries=["the kubernetes deploy"])  # 'the' is a stopword: two words count
    assert scored(memory, request).components["tag"] == 0.5
    assert scored(memory, request, arms={"tag": 0.3}).components["tag"] == 0.5
    assert scored(memory, request, arms={"tag": 0.8}).components["tag"] == 0.8
    assert scored(memory, req(embedding=[0.1])).components["tag"] == 0.0


def test_components_are_rounded_but_the_final_score_is_not():
    memory = mem(timestamp=NOW - timedelta(days=1))
    candidate = scored(memory, weights={"recency": 1.0})
    assert candidate.components["recency"] == round(math.exp(-0.005), 6)
    assert candidate.final == pytest.approx(math.exp(-0.005), abs=1e-12)


# dedupe --------------------------------------------------------------------------------------------------


def test_fingerprint_ignores_case_and_whitespace_only():
    assert fingerprint("Hello  World\n") == fingerprint("hello world")
    assert fingerprint("hello world") != fingerprint("hello, world")
    assert fingerprint("helloworld") != fingerprint("hello world")


def test_dedupe_by_content_keeps_the_best_and_lists_the_others():
    best = cand(mem("a", "Use  PostgreSQL"), 0.9)
    low = cand(mem("b", "use postgresql"), 0.2)
    mid = cand(mem("c", "USE postgresql\n"), 0.5)
    other = cand(mem("d", "use mongodb"), 0.7)
    result = dedupe([low, other, mid, best])
    assert [c.id for c in result] == ["a", "d"]
    assert result[0].deduped_from == ["c", "b"]
    assert result[1].deduped_from == []


def test_dedupe_by_id_keeps_the_best_without_listing_itself():
    head = mem("h", "the current plan")
    replacement = cand(head, 0.8, state_replaces="old")
    itself = cand(head, 0.4)
    result = dedupe([itself, replacement])
    assert result == [replacement]
    assert result[0].deduped_from == []


def test_dedupe_drops_unhydrated_candidates():
    kept = cand(mem("a"), 0.1)
    assert dedupe([Candidate("ghost", final=0.9), kept]) == [kept]


def test_dedupe_of_nothing():
    assert dedupe([]) == []


# order ---------------------------------------------------------------------------------------------------


def test_order_by_score_breaks_ties_by_importance_then_newer_then_id():
    a = cand(mem("a", importance=0.5, timestamp=NOW - timedelta(days=2)), 0.5)
    b = cand(mem("b", importance=0.9, timestamp=NOW - timedelta(days=9)), 0.5)
    c = cand(mem("c", importance=0.5, timestamp=NOW - timedelta(days=1)), 0.5)
    d = cand(mem("d", importance=0.5, timestamp=NOW - timedelta(days=1)), 0.5)
    top = cand(mem("z", importance=0.0, timestamp=NOW - timedelta(days=99)), 0.6)
    assert [x.id for x in order([a, b, c, d, top], "score")] == ["z", "b", "c", "d", "a"]
    assert [x.id for x in order([d, top, c, b, a], "score")] == ["z", "b", "c", "d", "a"]


def test_order_by_time_and_by_update():
    # Timestamps run a < b < c; updates run the other way.
    a = cand(mem("a", timestamp=NOW - timedelta(days=3), updated_at=NOW - timedelta(hours=1)), 0.1)
    b = cand(mem("b", timestamp=NOW - timedelta(days=2), updated_at=NOW - timedelta(hours=2)), 0.9)
    c = cand(mem("c", timestamp=NOW - timedelta(days=1), updated_at=NOW - timedelta(hours=3)), 0.5)
    items = [b, a, c]
    assert [x.id for x in order(items, "time_desc")] == ["c", "b", "a"]
    assert [x.id for x in order(items, "time_asc")] == ["a", "b", "c"]
    assert [x.id for x in order(items, "updated_desc")] == ["a", "b", "c"]
    assert [x.id for x in order(items, "updated_asc")] == ["c", "b", "a"]
    assert [x.id for x in order(items, "score")] == ["b", "c", "a"]


def test_order_does_not_change_its_input():
    a, b = cand(mem("a"), 0.1), cand(mem("b"), 0.9)
    items = [a, b]
    order(items, "score")
    assert items == [a, b]


# diversify -----------------------------------------------------------------------------------------------


def sourced(memory_id: str, final: float, source: str | None) -> Candidate:
    metadata = {"source": source} if source is not None else {}
    return cand(mem(memory_id, metadata=metadata), final)


def ids(candidates):
    return [c.id for c in candidates]


def test_factor_zero_keeps_the_order_up_to_the_limit():
    ranked = [sourced("a1", 0.9, "a"), sourced("a2", 0.89, "a"), sourced("b1", 0.88, "b")]
    assert ids(diversify(ranked, 0.0, 10)) == ["a1", "a2", "b1"]
    assert ids(diversify(ranked, 0.0, 2)) == ["a1", "a2"]


def test_a_lone_source_within_the_factor_is_pulled_up():
    ranked = [sourced("a1", 0.9, "gmail"), sourced("a2", 0.85, "gmail"), sourced("b1", 0.8, "slack")]
    assert ids(diversify(ranked, 0.15, 10)) == ["a1", "b1", "a2"]


def test_a_source_outside_the_factor_is_not_pulled_up():
    ranked = [sourced("a1", 0.9, "gmail"), sourced("a2", 0.85, "gmail"), sourced("b1", 0.5, "slack")]
    assert ids(diversify(ranked, 0.15, 10)) == ["a1", "a2", "b1"]


def test_the_factor_bound_is_inclusive():
    ranked = [sourced("a1", 1.0, "a"), sourced("a2", 0.75, "a"), sourced("b1", 0.5, "b")]
    # Slot 2: b1 is 0.25 below the best remaining (a2 at 0.75): exactly the factor.
    assert ids(diversify(ranked, 0.25, 10)) == ["a1", "b1", "a2"]
    assert ids(diversify(ranked, 0.24, 10)) == ["a1", "a2", "b1"]


def test_full_diversity_interleaves_sources_round_robin():
    ranked = [
        sourced("a1", 0.9, "a"),
        sourced("a2", 0.8, "a"),
        sourced("a3", 0.7, "a"),
        sourced("b1", 0.3, "b"),
        sourced("b2", 0.2, "b"),
        sourced("c1", 0.1, "c"),
    ]
    assert ids(diversify(ranked, 1.0, 10)) == ["a1", "b1", "c1", "a2", "b2", "a3"]


def test_diversify_respects_the_limit():
    ranked = [sourced("a1", 0.9, "a"), sourced("a2", 0.85, "a"), sourced("b1", 0.8, "b"), sourced("c1", 0.79, "c")]
    assert ids(diversify(ranked, 0.15, 2)) == ["a1", "b1"]
    assert ids(diversify(ranked, 0.15, 0)) == []


def test_a_missing_source_counts_as_manual_and_sources_ignore_case():
    assert source_of(sourced("x", 0.5, None)) == "manual"
    assert source_of(sourced("x", 0.5, "")) == "manual"
    assert source_of(sourced("x", 0.5, "Slack")) == "slack"
    ranked = [
        sourced("m1", 0.9, None),
        sourced("m2", 0.88, "MANUAL"),
        sourced("s1", 0.87, "Slack"),
        sourced("s2", 0.86, "slack"),
    ]
    assert ids(diversify(ranked, 0.15, 10)) == ["m1", "s1", "m2", "s2"]


def test_diversify_of_one_or_none():
    one = [sourced("a", 0.5, "x")]
    assert ids(diversify(one, 0.5, 10)) == ["a"]
    assert ids(diversify(one, 0.5, 0)) == []
    assert diversify([], 0.5, 10) == []


# stand_in ------------------------------------------------------------------------------------------------


def test_the_head_takes_the_superseded_candidates_place_and_score():
    old = cand(mem("old", "we use mysql", importance=1.0), 0.77, arms={"vector": 0.9, "keyword": 0.4})
    old.deduped_from.append("dup")
    head = mem("new", "we use postgres", importance=0.1)
    replacement = stand_in(old, head)
    assert replacement.id == "new"
    assert replacement.memory is head
    assert replacement.final == 0.77
    assert replacement.arms == {"vector": 0.9, "keyword": 0.4}
    assert replacement.state_replaces == "old"
    assert replacement.deduped_from == []
    assert replacement.match_type == "state_replacement"
    assert replacement.match_score == 0.9
    # The original is left as it was.
    assert (old.id, old.memory.id, old.state_replaces, old.deduped_from) == ("old", "old", None, ["dup"])


def test_a_stand_in_outranks_its_own_head_found_separately_when_it_scores_higher():
    head = mem("new", "we use postgres")
    replacement = stand_in(cand(mem("old", "we use mysql"), 0.8), head)
    found = cand(head, 0.3)
    assert dedupe([found, replacement]) == [replacement]


# in_scope ------------------------------------------------------------------------------------------------


def scope(**fields) -> Scope:
    return Scope(tenant="acme", at=NOW, **fields)


@pytest.mark.parametrize(
    ("tags", "scope_fields", "inside"),
    [
        (["project:memgrid:api"], {}, True),
        (["project:memgrid:api"], {"tags": ("project",)}, True),
        (["project:memgrid:api"], {"tags": ("project:memgrid",)}, True),
        (["project:memgrid:api"], {"tags": ("memgrid",)}, False),
        (["project:memgrid:api"], {"tags": ("project",), "tag_match": "exact"}, False),
        (["project:memgrid:api"], {"tags": ("project:memgrid:api",), "tag_match": "exact"}, True),
        (["Project:MemGrid"], {"tags": ("project:memgrid",), "tag_match": "exact"}, True),
        (["db", "urgent"], {"tags": ("db", "ops")}, True),
        (["db", "urgent"], {"tags": ("db", "ops"), "tag_mode": "all"}, False),
        (["db", "urgent"], {"tags": ("db", "urgent"), "tag_mode": "all"}, True),
        (["db/postgres", "team:x"], {"tags": ("db", "team"), "tag_mode": "all"}, True),
        (["db/postgres", "team:x"], {"tags": ("db", "team"), "tag_mode": "all", "tag_match": "exact"}, False),
        ([], {"tags": ("db",)}, False),
        (["db", "old"], {"exclude_tags": ("old",)}, False),
        (["db", "old:2024"], {"exclude_tags": ("old",)}, False),
        (["db", "old:2024"], {"exclude_tags": ("old",), "tag_match": "exact"}, True),
        (["db", "Old"], {"exclude_tags": ("old",), "tag_match": "exact"}, False),
        (["db"], {"tags": ("db",), "exclude_tags": ("old",)}, True),
        (["db", "old"], {"tags": ("db",), "exclude_tags": ("old",)}, False),
    ],
)
def test_in_scope_tag_filters(tags, scope_fields, inside):
    assert in_scope(mem(tags=tags), scope(**scope_fields)) is inside


def test_in_scope_requires_the_tenant_and_not_archived():
    assert in_scope(mem(), scope())
    assert not in_scope(mem(tenant="other"), scope())
    assert not in_scope(mem(archived=True), scope())
    assert not in_scope(mem(archived=True), scope(history=True))


def test_in_scope_window_is_half_open_on_the_timestamp():
    window = Window(NOW - timedelta(days=7), NOW)
    assert in_scope(mem(timestamp=NOW - timedelta(days=7)), scope(window=window))
    assert in_scope(mem(timestamp=NOW - timedelta(seconds=1)), scope(window=window))
    assert not in_scope(mem(timestamp=NOW), scope(window=window))
    assert not in_scope(mem(timestamp=NOW - timedelta(days=8)), scope(window=window))
    assert in_scope(mem(timestamp=NOW - timedelta(days=800)), scope(window=Window(end=NOW)))
    assert not in_scope(mem(timestamp=NOW - timedelta(days=800)), scope(window=Window(start=WEEK_AGO)))


def test_in_scope_as_of_uses_recorded_at():
    as_of = NOW - timedelta(days=3)
    # The timestamp may be old; what counts is when the system learned it.
    late = mem(timestamp=NOW - timedelta(days=30), recorded_at=NOW - timedelta(days=1))
    assert not in_scope(late, scope(as_of=as_of))
    assert in_scope(mem(recorded_at=as_of), scope(as_of=as_of))
    assert in_scope(mem(recorded_at=as_of - timedelta(days=1)), scope(as_of=as_of))
    assert in_scope(late, scope())


def test_the_text_arms_document_frequency_bound_grows_with_the_corpus():
    assert POLICY.max_document_frequency(0) == 200
    assert POLICY.max_document_frequency(10_000) == 200
    assert POLICY.max_document_frequency(100_000) == 2000
    # ... up to its bound: a word's matches cost the same at a million memories as at 100k.
    assert POLICY.max_document_frequency(1_000_000) == 2000
    assert replace(POLICY, keyword_max_df=50).max_document_frequency(1_000_000) == 200  # never under the floor


def test_common_words_are_those_in_the_most_texts_commonest_first():
    texts = ["The harbour light", "harbour light harbour", "a light at sea", "sea harbour", "unique"]
    assert common_words(texts, 10) == ["harbour", "light", "sea"]  # per text, not per use; stopwords out
    assert common_words(texts, 1) == ["harbour"]


# Request limits (RECALL_MAX_QUERIES, RECALL_MAX_QUERY_WORDS, RECALL_MAX_PRIORITY_IDS) ------------------


def test_too_many_queries_is_invalid_naming_queries():
    req(queries=[f"q{i}" for i in range(10)])  # the default limit, exactly
    with pytest.raises(InvalidArgument) as error:
        req(query="first", queries=[f"q{i}" for i in range(10)])
    assert error.value.field == "queries" and "10" in str(error.value)
    assert build_request(policy(max_queries=2), **_base(queries=["a", "b", "a"])).queries == ("a", "b")


def test_a_query_of_too_many_words_is_invalid_naming_its_parameter():
    req(query=" ".join(["word"] * 64))
    with pytest.raises(InvalidArgument) as error:
        req(query=" ".join(["word"] * 65))
    assert error.value.field == "query"
    with pytest.raises(InvalidArgument) as error:
        req(queries=["short", " ".join(["word"] * 65)])
    assert error.value.field == "queries"


def test_priority_ids_are_memory_ids_and_bounded():
    with pytest.raises(InvalidArgument) as error:
        req(priority_ids=["not-an-id"])
    assert error.value.field == "priority_ids"
    ids = [f"0b0c5d6e-0000-4000-8000-{i:012d}" for i in range(101)]
    assert len(req(priority_ids=ids[:100]).priority_ids) == 100
    with pytest.raises(InvalidArgument) as error:
        req(priority_ids=ids)
    assert error.value.field == "priority_ids" and "100" in str(error.value)


def _base(**params):
    return {"tenant": "acme", "now": NOW, "history": False, "as_of": None, "window": Window(), **params}


# auto_decompose (services/core/domain/decompose.py) -----------------------------------------------------


def test_query_entities_are_names_not_sentence_starts_or_question_words():
    assert query_entities("Would Caroline pursue writing?") == ["Caroline"]
    assert query_entities("What did Melanie's sister say to John in March?") == ["John", "Melanie"]
    assert query_entities("Caroline went home. Then Bob left") == ["Bob"]  # sentence starts are no names


def test_decompose_pairs_each_entity_with_the_topics():
    queries = decompose("Would Caroline pursue writing as a career?", DecomposePolicy())
    assert queries == ["Caroline", "Caroline writing", "Caroline career", "Caroline interests goals plans"]
    assert decompose("Did John or Maria or Pete visit Paris?", DecomposePolicy(max_entities=2))[0::2] == [
        "John", "Maria",
    ]  # fmt: skip


def test_decompose_without_entities_searches_the_topics():
    assert decompose("which database handles the sessions cache", DecomposePolicy(max_topics=2)) == [
        "database", "handles",
    ]  # fmt: skip
    assert decompose("is it ok", DecomposePolicy()) == []


def test_auto_decompose_adds_widening_queries_to_a_single_query_only():
    request = req(query="Would Caroline pursue writing?", auto_decompose=True)
    # The question alone scores; its names and topics only widen the candidates (services/recall/widening.py).
    assert request.queries == ("Would Caroline pursue writing?",)
    assert request.widening == ("Caroline", "Caroline writing")
    assert request.asked == ("Would Caroline pursue writing?", "Caroline", "Caroline writing")
    assert request.multi and request.keywords == ("caroline", "pursue", "writing")
    single = req(query="Would Caroline pursue writing?")
    assert single.queries == ("Would Caroline pursue writing?",) and not single.multi
    several = req(queries=["Would Caroline pursue writing?", "Bob"], auto_decompose=True)
    assert several.queries == ("Would Caroline pursue writing?", "Bob") and several.multi
    assert not several.widening


# Context hints (services/core/domain/context_hints.py) --------------------------------------------------


def test_language_is_read_from_the_hint_the_path_or_the_query():
    assert detect_language("py", "", "", "") == "python"
    assert detect_language("", "typescript", "", "") == "typescript"
    assert detect_language("", "", "", "src/auth.rs") == "rust"
    assert detect_language("", "", "golang error handling", "") == "go"
    assert detect_language("", "", "nothing here", "README") is None


def test_a_language_favours_its_style_notes():
    profile = context_profile(tags=["db"], types=[], language="python")
    assert profile.language == "python" and profile.keywords == ("python",)
    assert {"db", "python", "python-style", "python:style", "coding-style"} <= set(profile.tags)
    assert set(profile.types) == {"style", "preference"}


def test_a_plain_context_label_is_a_priority_tag_and_the_query_counts_only_with_a_hint():
    assert context_profile(tags=[], types=[], context="Architecture").tags == ("architecture",)
    assert not context_profile(tags=[], types=[], query="where did we go for lunch")
    assert context_profile(tags=[], types=[], context="x", query="where did we go").language == "go"
    assert "coding-style" in context_profile(tags=[], types=[], context="formatting").tags


def test_context_hints_feed_the_context_component():
    request = req(queries=["linting"], language="python", context_types=["Decision"])
    assert "decision" in request.context_types and "style" in request.context_types
    tagged = cand(mem("a", tags=["python-style"]))
    typed = cand(mem("b", type="Preference"))
    worded = cand(mem("c", content="we use python everywhere"))
    other = cand(mem("d"))
    for candidate in (tagged, typed, worded, other):
        score(candidate, request, POLICY, RECALL_WEIGHTS)
    assert tagged.components["context"] == typed.components["context"] == 1.0
    assert worded.components["context"] == POLICY.context_keyword_score
    assert other.components["context"] == 0.0


# The adaptive floor (services/core/domain/score_floor.py) -----------------------------------------------


def test_adaptive_floor_cuts_below_a_sharp_drop_near_the_top():
    scores = [0.9, 0.88, 0.86, 0.3, 0.28, 0.27, 0.26, 0.25]
    assert adaptive_floor(scores, min_results=3, gap_ratio=0.25) == 0.3  # kept: 4 of 8


def test_adaptive_floor_keeps_at_least_half_and_needs_a_large_drop():
    assert adaptive_floor([0.9, 0.2, 0.19, 0.18, 0.17, 0.16], min_results=3, gap_ratio=0.25) is None  # 1 of 6
    assert adaptive_floor([0.9, 0.8, 0.7, 0.6, 0.5, 0.4], min_results=3, gap_ratio=0.25) is None  # no drop
    assert adaptive_floor([0.9, 0.1, 0.1], min_results=3, gap_ratio=0.25) is None  # too short to judge


def test_adaptive_floor_defaults_to_the_setting():
    assert req(queries=["x"]).adaptive_floor is False
    assert build_request(policy(adaptive_floor=True), **_base(queries=["x"])).adaptive_floor is True
    assert (
        build_request(policy(adaptive_floor=True), **_base(queries=["x"], adaptive_floor=False)).adaptive_floor is False
    )


# Assembly (services/core/domain/recall_assembly.py) -----------------------------------------------------


def test_per_query_limit_caps_each_querys_share():
    a, b, c, d = (cand(mem(i), f) for i, f in (("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6)))
    a.queries, b.queries, c.queries, d.queries = {0}, {0}, {1}, {0, 1}
    listed = cand(mem("e"), 0.1)
    kept = per_query_cap([a, b, c, d, listed], 1, 2)
    assert [x.id for x in kept] == ["a", "c", "e"]
    assert per_query_cap([a, b, c, d], 5, 2) == [a, b, c, d]
    assert per_query_cap([a, b], 1, 1) == [a, b]  # one query: the limit decides
    assert req(queries=["x"], limit=7).per_query_limit == 7
    assert req(queries=["x", "y"], limit=7, per_query_limit=2).per_query_limit == 2


def test_expansions_leave_out_what_the_results_hold():
    seed = cand(mem("a", content="Postgres for ACID"), 0.9)
    same_id = cand(mem("a"), 0.5)
    same_content = cand(mem("b", content="postgres   for acid"), 0.5)
    new = cand(mem("c", content="Redis for sessions"), 0.4)
    added, merged = append_new([seed], [same_id, same_content, new])
    assert [c.id for c in added] == ["c"] and merged == 1
    assert seed.deduped_from == ["b"]


def test_entity_names_come_from_entity_tags():
    memory = mem("a", tags=["entity:people:rachel", "project", "entity:tech:postgres", "entity:people:rachel"])
    assert entity_names(memory) == ["rachel", "postgres"]


def test_expansion_leaves_the_tag_scope_unless_told_to_respect_it():
    scope = req(tags=["project"], exclude_tags=["draft"]).scope
    outside = mem("a", tags=["other"])
    assert not in_scope(outside, scope)
    assert in_scope(outside, scope, respect_tags=False)
    assert not in_scope(mem("b", tags=["other", "draft"]), scope, respect_tags=False)  # exclude_tags still bind


@pytest.mark.parametrize("field", ["tags", "exclude_tags", "context_tags"])
def test_read_side_tags_are_capped_like_the_write_side(field):
    from services.core.domain.limits import Limits

    capped = policy(tag_limits=Limits(max_tags=2, max_tag_chars=8))
    base = {"tenant": "acme", "now": NOW, "history": False, "as_of": None, "window": Window()}
    with pytest.raises(InvalidArgument) as refused:
        build_request(capped, **base, query="x", **{field: ["a", "b", "c"]})
    assert refused.value.field == field and refused.value.reason == "TOO_MANY_TAGS"
    with pytest.raises(InvalidArgument) as refused:
        build_request(capped, **base, query="x", **{field: ["x" * 9]})
    assert refused.value.reason == "TAG_TOO_LONG"
    assert build_request(capped, **base, query="x", **{field: ["a", "b"]})
    assert build_request(policy(), **base, query="x", **{field: ["a", "b", "c"]})  # unchecked without limits
