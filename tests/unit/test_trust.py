"""The trust rules, pure: states and their moves, the review policy, the
tombstone key, and recall's down-weighting of disputed and FICTION memories."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from services.core.domain.decompose import DecomposePolicy
from services.core.domain.drafts import Draft
from services.core.domain.errors import AlreadyExists, FailedPrecondition, InvalidArgument
from services.core.domain.limits import Limits
from services.core.domain.model import Memory
from services.core.domain.recall_ranking import trust_weight
from services.core.domain.recall_request import RecallPolicy, Scope, in_scope
from services.core.domain.review_policy import ReviewPolicy, review_rule
from services.core.domain.supersede import close_superseded
from services.core.domain.tombstones import (
    TombstoneGuard,
    content_hash,
    delete_leaves_tombstone,
    refuse_tombstoned,
    tombstone_for,
    tombstone_id,
)
from services.core.domain.trust import (
    ALL_STATES,
    VISIBLE_BY_DEFAULT,
    TrustState,
    from_metadata,
    moved,
    parse_patch_state,
    parse_trust_states,
    require_move,
    trust_of,
)
from services.core.domain.updates import apply_update, update_kind

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def memory(**fields) -> Memory:
    base = Memory(
        id="m1", tenant="acme", content="Chose Postgres", type="Decision", confidence=0.9, importance=0.5,
        timestamp=NOW, t_valid=NOW, updated_at=NOW, last_accessed=NOW, recorded_at=NOW,
    )  # fmt: skip
    return replace(base, **fields)


def policy(**fields) -> RecallPolicy:
    base = RecallPolicy(
        default_limit=10, max_limit=100, candidate_multiplier=3, candidate_min=10, candidate_cap=100, shortlist_min=10,
        relation_limit=5, expansion_limit=5, expand_min_strength=0.0, expand_min_importance=0.0, max_hops=3,
        recency_decay_rate=0.005, diversity_factor=0.0, weights={}, source_trust={}, default_trust=0.7,
        keyword_max_df_ratio=0.02, keyword_min_df=5, keyword_max_df=2000, keyword_candidates=100, keyword_scan=100,
        bm25_k1=0.9, bm25_b=0.4, related_threshold=0.4, related_per_word=8,
        # What RecallPolicy's own defaults were before the settings became their one source.
        max_queries=10, max_query_words=64, max_priority_ids=100, adaptive_floor=False, adaptive_floor_min_results=3,
        adaptive_floor_gap=0.25, context_inject_limit=3, context_keyword_score=0.5, decompose=DecomposePolicy(),
        related_max_depth=3, relevance_unscored=1.0, disputed_weight=1.0, fiction_weight=1.0, neighbourhood_seconds=0.0,
        neighbourhood_adjacent=0, nameless_query_share=0.0, tag_limits=None,
    )  # fmt: skip
    return replace(base, **fields)


def test_a_missing_or_unknown_state_reads_as_active():
    assert trust_of(None) is TrustState.ACTIVE
    assert trust_of("") is TrustState.ACTIVE
    assert trust_of("made-up") is TrustState.ACTIVE
    assert trust_of("disputed") is TrustState.DISPUTED


def test_recall_withholds_pending_rejected_and_deprecated_by_default():
    assert set(VISIBLE_BY_DEFAULT) == {"active", "verified", "disputed", "superseded"}
    assert parse_trust_states([]) == VISIBLE_BY_DEFAULT
    asked = parse_trust_states(["pending_review,rejected", " Deprecated "])
    assert asked == ("pending_review", "rejected", "deprecated")
    assert parse_trust_states(["all"]) == ALL_STATES
    with pytest.raises(InvalidArgument) as caught:
        parse_trust_states(["trusted"])
    assert caught.value.field == "trust_states"


def test_the_scope_withholds_by_trust_state_in_history_mode_too():
    pending = memory(trust_state="pending_review")
    assert not in_scope(pending, Scope(tenant="acme", at=NOW, history=True))
    assert in_scope(pending, Scope(tenant="acme", at=NOW, trust_states=("pending_review",)))
    assert in_scope(memory(), Scope(tenant="acme", at=NOW))


def test_system_moves_that_are_not_allowed_leave_the_state_and_client_moves_are_refused():
    assert moved(TrustState.ACTIVE, TrustState.DISPUTED) is TrustState.DISPUTED
    assert moved(TrustState.REJECTED, TrustState.DISPUTED) is TrustState.REJECTED
    assert moved(TrustState.PENDING_REVIEW, TrustState.SUPERSEDED) is TrustState.PENDING_REVIEW
    assert require_move(TrustState.PENDING_REVIEW, TrustState.VERIFIED) is TrustState.VERIFIED
    with pytest.raises(FailedPrecondition):
        require_move(TrustState.VERIFIED, TrustState.REJECTED)
    with pytest.raises(FailedPrecondition):
        require_move(TrustState.REJECTED, TrustState.ACTIVE)


def test_a_patch_may_deprecate_and_undo_it_only():
    assert parse_patch_state("Deprecated") is TrustState.DEPRECATED
    assert parse_patch_state("active") is TrustState.ACTIVE
    for value in ("verified", "rejected", 3, None):
        with pytest.raises(InvalidArgument):
            parse_patch_state(value)


def test_the_mcp_clients_metadata_keys_are_read_into_the_state():
    assert from_metadata({"deprecated": True}) is TrustState.DEPRECATED
    assert from_metadata({"deprecated": "true"}) is TrustState.DEPRECATED
    assert from_metadata({"superseded_by": "m2"}) is TrustState.SUPERSEDED
    assert from_metadata({"deprecated": False, "other": 1}) is None
    assert from_metadata(None) is None


def test_a_patch_sets_the_state_and_its_event_says_trust_changed():
    before = memory()
    after, changed = apply_update(before, Draft(trust_state="deprecated"), {"trust_state"}, now=NOW, limits=Limits())
    assert after.trust_state == "deprecated" and not changed and after.version == before.version + 1
    assert update_kind(before, after, changed).value == "trust_changed"
    by_metadata, _ = apply_update(
        before, Draft(metadata_json='{"deprecated": true}'), {"metadata"}, now=NOW, limits=Limits()
    )
    assert by_metadata.trust_state == "deprecated"
    pending = memory(trust_state="pending_review")
    with pytest.raises(FailedPrecondition):
        apply_update(pending, Draft(trust_state="deprecated"), {"trust_state"}, now=NOW, limits=Limits())


def test_a_superseded_memory_becomes_superseded_unless_under_review():
    replacement = memory(id="m2")
    assert close_superseded(memory(), replacement, reason="", now=NOW).trust_state == "superseded"
    pending = memory(trust_state="pending_review")
    assert close_superseded(pending, replacement, reason="", now=NOW).trust_state == "pending_review"


def test_the_review_policy_names_the_first_rule_that_holds():
    low = memory(confidence=0.3)
    assert review_rule(low, ReviewPolicy()) is None  # the defaults review nothing
    rules = ReviewPolicy(low_confidence_types=frozenset({"Decision"}), confidence_below=0.6)
    assert review_rule(low, rules) == "low_confidence"
    assert review_rule(memory(confidence=0.6), rules) is None
    assert review_rule(replace(low, type="Insight"), rules) is None
    assert review_rule(low, replace(rules, tenants=frozenset({"acme"}))) == "tenant"
    story = memory(content="Imagine a dragon that runs our deploys")
    assert review_rule(story, ReviewPolicy(fiction=True)) == "fiction"
    assert review_rule(memory(), ReviewPolicy(fiction=True)) is None


def test_the_tombstone_key_ignores_case_and_spacing_and_is_per_tenant():
    assert content_hash("Chose  Postgres\n") == content_hash("chose postgres")
    assert content_hash("Chose Postgres") != content_hash("Chose Postgres!")
    digest = content_hash("x")
    assert tombstone_id("acme", digest) != tombstone_id("beta", digest)
    stone = tombstone_for("acme", "m1", "Chose Postgres", "rejected", NOW)
    assert stone.id == tombstone_id("acme", content_hash("chose postgres")) and stone.excerpt == "chose postgres"
    error = refuse_tombstoned(stone, index=3)
    assert isinstance(error, AlreadyExists) and "index 3" in error.message and stone.id in error.message
    assert error.details["tombstone_id"] == stone.id and error.details["tombstone_reason"] == "rejected"


def test_a_tombstone_guard_names_what_each_memory_passed_and_finds_its_first_held_text():
    summary, original = content_hash("short summary"), content_hash("the long original")
    stone = tombstone_for("acme", "m1", "The long original", "rejected", NOW)
    other = tombstone_for("acme", "m2", "short summary", "review_rejected", NOW)
    guard = TombstoneGuard.of("acme", [[content_hash("free")], [summary, original]], {1: stone})
    assert guard.passed == ("", original)
    assert guard.hits({original: stone}) == {1: stone}
    assert guard.hits({original: stone, summary: other}) == {1: other}  # the content before its original
    assert guard.hits({}) == {}


def test_a_delete_leaves_a_tombstone_for_reason_rejected_or_tombstone_true():
    assert delete_leaves_tombstone("rejected", False)
    assert delete_leaves_tombstone("", True)
    assert not delete_leaves_tombstone(None, False)
    with pytest.raises(InvalidArgument) as caught:
        delete_leaves_tombstone("boring", False)
    assert caught.value.field == "reason"


def test_disputed_and_fiction_are_down_weighted_by_the_settings():
    weights = policy(disputed_weight=0.6, fiction_weight=0.5)
    assert trust_weight(memory(), weights) == 1.0
    assert trust_weight(memory(trust_state="disputed"), weights) == 0.6
    fiction = {"label": "FICTION", "confidence": 0.6, "rationale": "imagine"}
    assert trust_weight(memory(factuality=fiction), weights) == 0.5
    assert trust_weight(memory(trust_state="disputed", factuality=fiction), weights) == pytest.approx(0.3)
    assert trust_weight(memory(trust_state="disputed"), policy()) == 1.0  # weight 1: as before
