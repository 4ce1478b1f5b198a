"""The outcome of a review (services/core/domain/review.py): what one
approve or reject writes, decided without a store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.core.domain.errors import FailedPrecondition
from services.core.domain.model import EventKind
from services.core.domain.review import review_outcome
from services.core.domain.tombstones import REVIEW_REJECTED, content_hash
from services.core.domain.trust import TrustState
from tests.factories import memory_at

EARLIER = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
NOW = EARLIER + timedelta(hours=1)
ID = "00000000-0000-4000-8000-000000000001"


def pending(**fields):
    """A memory the fiction rule sent to review, at version 3; other fields by name."""
    values = {"content": "The Moon is made of cheese", "trust_state": "pending_review", "review_rule": "fiction"}
    return memory_at(ID, EARLIER, tenant="acme", version=3, **{**values, **fields})


def test_an_approval_verifies_the_memory_with_one_reviewed_event_and_no_tombstone():
    before = pending()
    outcome = review_outcome(before, approve=True, note="", now=NOW)
    assert outcome.memory.trust_state == TrustState.VERIFIED.value
    assert (outcome.memory.version, outcome.memory.updated_at) == (4, NOW)
    assert outcome.tombstone is None
    [event] = outcome.events
    assert (event.kind, event.memory_id, event.version) == (EventKind.REVIEWED, ID, 4)
    assert (event.trust_state, event.previous_trust_state) == ("verified", "pending_review")
    assert event.reason == "fiction"  # no note: the rule that sent it to review
    assert before.trust_state == "pending_review" and before.version == 3  # the memory read is left as it was


def test_a_rejection_tombstones_the_content_in_the_same_outcome():
    outcome = review_outcome(pending(), approve=False, note="made up", now=NOW)
    assert outcome.memory.trust_state == TrustState.REJECTED.value
    stone = outcome.tombstone
    assert stone is not None
    assert (stone.tenant, stone.memory_id, stone.reason) == ("acme", ID, REVIEW_REJECTED)
    assert stone.content_hash == content_hash("The Moon is made of cheese")
    reviewed, tombstoned = outcome.events
    assert (reviewed.kind, reviewed.reason, reviewed.trust_state) == (EventKind.REVIEWED, "made up", "rejected")
    assert (tombstoned.kind, tombstoned.tombstone_id, tombstoned.reason) == (
        EventKind.TOMBSTONE_SET,
        stone.id,
        REVIEW_REJECTED,
    )
    assert (tombstoned.tenant, tombstoned.memory_id) == ("acme", ID)


@pytest.mark.parametrize("state", ["active", "verified", "rejected", "disputed", "deprecated"])
@pytest.mark.parametrize("approve", [True, False])
def test_a_memory_not_waiting_for_review_is_a_failed_precondition_naming_its_state(state, approve):
    with pytest.raises(FailedPrecondition) as refused:
        review_outcome(pending(trust_state=state), approve=approve, note="", now=NOW)
    assert refused.value.reason == "NOT_PENDING_REVIEW"
    assert refused.value.details["trust_state"] == state
    assert refused.value.field == "id"
