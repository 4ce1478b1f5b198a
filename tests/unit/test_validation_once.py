"""Validation once: where the gateway refuses a value before the services
see it, it answers with the domain rule's own reason and message."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from gateway.envelope import ApiError
from gateway.translate import draft_from_json, update_from_json
from services.core.domain.batch import check_batch
from services.core.domain.drafts import Draft
from services.core.domain.errors import InvalidArgument
from services.core.domain.limits import Limits
from services.core.domain.model import Memory
from services.core.domain.recall_request import build_request
from services.core.domain.tags import required_tag_keys
from services.core.domain.timewindow import Window
from services.core.domain.updates import apply_update
from services.core.settings import Settings
from tests.unit.test_gateway_input import AUTH, app_client

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)
LIMITS = Limits(vector_size=3)


def refusal(call) -> tuple[str, str]:
    """(reason, message) of an ApiError or a domain error."""
    with pytest.raises((ApiError, InvalidArgument)) as refused:
        call()
    return refused.value.reason, refused.value.message


def stored() -> Memory:
    return Memory(
        id="m1", tenant="acme", content="c", type="Context", confidence=0.5, importance=0.5,
        timestamp=NOW, t_valid=NOW, updated_at=NOW, last_accessed=NOW, recorded_at=NOW,
    )  # fmt: skip


def test_archived_is_refused_as_the_update_rule_refuses_it():
    gateway = refusal(lambda: update_from_json({"archived": "yes"}))
    domain = refusal(lambda: apply_update(stored(), Draft(archived="yes"), {"archived"}, now=NOW, limits=LIMITS))
    assert gateway == domain == ("INVALID_ARCHIVED", "'archived' must be true or false")


@pytest.mark.parametrize("name", ["importance", "confidence"])
@pytest.mark.parametrize("value", ["high", True, [0.5]])
def test_a_score_that_is_no_number_is_refused_as_the_draft_rule_refuses_it(name, value):
    gateway = refusal(lambda: draft_from_json({"content": "x", "type": "Decision", name: value}))
    draft = Draft(content="x", type="Decision", **{name: value})
    domain = refusal(lambda: apply_update(stored(), draft, {name}, now=NOW, limits=LIMITS))
    assert gateway == domain
    assert gateway[0] == "NOT_A_NUMBER" and f"'{name}'" in gateway[1]


def test_a_batch_item_without_content_is_refused_in_the_spec_words_both_sides():
    gateway = refusal(lambda: draft_from_json({"type": "Decision"}, index=2))
    domain = refusal(
        lambda: check_batch([Draft(content="a"), Draft(content="b"), Draft()], tenant="acme", now=NOW, limits=LIMITS)
    )
    assert gateway == domain == ("CONTENT_REQUIRED", "Memory at index 2 missing 'content'")


def test_a_batch_items_wrong_score_names_its_index_as_the_batch_rule_does():
    gateway = refusal(lambda: draft_from_json({"content": "x", "importance": "high"}, index=0))
    items = [Draft(content="x", importance="high")]
    domain = refusal(lambda: check_batch(items, tenant="acme", now=NOW, limits=LIMITS))
    assert gateway == domain
    assert gateway[1].startswith("Memory at index 0: 'importance'")


async def test_by_tag_without_tags_is_refused_as_the_tag_rule_refuses_it():
    async with app_client() as client:
        reply = await client.get("/memory/by-tag", headers=AUTH)
    body = reply.json()
    assert reply.status_code == 400
    assert (body["reason"], body["message"]) == refusal(lambda: required_tag_keys([" "]))


@pytest.mark.parametrize("name", ["min_score", "recency_bias"])
async def test_a_score_bound_that_is_not_finite_is_refused_as_the_recall_rule_refuses_it(name):
    async with app_client() as client:
        reply = await client.get(f"/recall?{name}=inf", headers=AUTH)
    body = reply.json()
    settings = Settings(_env_file=None)
    policy = settings.recall.policy(settings.limits)
    request = {"tenant": "acme", "now": NOW, "history": False, "as_of": None, "window": Window(), name: math.inf}
    assert reply.status_code == 400
    assert (body["reason"], body["message"]) == refusal(lambda: build_request(policy, **request))
