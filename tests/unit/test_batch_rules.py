"""What a batch item may carry and the rules of its item idempotency keys
(services/core/domain/batch.py), without a store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.core.domain.batch import at_index, batch_item, check_batch, held_item_id, in_batch_order, keyed_items
from services.core.domain.drafts import Draft
from services.core.domain.errors import AlreadyExists, InvalidArgument
from services.core.settings import Settings
from tests.factories import memory_at

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LIMITS = Settings(_env_file=None).limits


def test_a_batch_item_drops_its_embedding_and_validity_window_and_keeps_the_rest():
    sent = Draft(
        content="kept",
        type="Decision",
        tags=["a"],
        importance=0.9,
        embedding=[0.1, 0.2],
        t_valid="2026-01-01T00:00:00Z",
        t_invalid="2026-02-01T00:00:00Z",
    )
    item = batch_item(sent)
    assert (item.embedding, item.t_valid, item.t_invalid) == (None, None, None)
    assert (item.content, item.type, item.tags, item.importance) == ("kept", "Decision", ["a"], 0.9)
    assert sent.embedding == [0.1, 0.2]  # the request's draft is left as it was


def test_check_batch_answers_the_items_as_stored():
    items = check_batch(
        [Draft(content="one", embedding=[1.0]), Draft(content="two", t_valid="not a time")],
        tenant="acme",
        now=NOW,
        limits=LIMITS,
    )
    assert [(d.content, d.embedding, d.t_valid) for d in items] == [("one", None, None), ("two", None, None)]


def test_check_batch_reports_the_lowest_bad_index_with_the_rules_reason():
    drafts = [Draft(content="fine"), Draft(content="  "), Draft(content="x" * (LIMITS.content_hard_limit + 1))]
    with pytest.raises(InvalidArgument) as refused:
        check_batch(drafts, tenant="acme", now=NOW, limits=LIMITS)
    assert refused.value.message.startswith("Memory at index 1: ")
    assert refused.value.details["index"] == "1"
    assert refused.value.field == "content"


def test_at_index_keeps_the_errors_type_reason_field_and_details():
    error = AlreadyExists("CONTENT_TOMBSTONED", "rejected before", field="content", tombstone_id="t1")
    named = at_index(4, error)
    assert type(named) is AlreadyExists
    assert (named.reason, named.message, named.field) == (
        "CONTENT_TOMBSTONED",
        "Memory at index 4: rejected before",
        "content",
    )
    assert named.details["tombstone_id"] == "t1" and named.details["index"] == "4"


def test_in_batch_order_records_items_a_microsecond_apart_in_their_order():
    memories = [memory_at(f"m{i}", NOW) for i in range(3)]
    ordered = in_batch_order(memories)
    assert [m.recorded_at - NOW for m in ordered] == [timedelta(microseconds=i) for i in range(3)]
    assert [m.id for m in ordered] == ["m0", "m1", "m2"]


@pytest.mark.parametrize("keys", [None, [], [("", "h0"), ("", "h1")]])
def test_a_batch_without_item_keys_has_none(keys):
    assert keyed_items(keys, 2) == {}


def test_item_keys_by_key_give_the_items_index_and_hash_and_skip_unkeyed_items():
    assert keyed_items([("k0", "h0"), ("", "h1"), ("k2", "h2")], 3) == {"k0": (0, "h0"), "k2": (2, "h2")}


def test_item_keys_must_be_one_per_memory():
    with pytest.raises(InvalidArgument) as refused:
        keyed_items([("k0", "h0")], 2)
    assert (refused.value.reason, refused.value.field) == ("INVALID_ARGUMENT", "item_idempotency_keys")


def test_a_key_twice_in_one_batch_names_the_second_index_and_the_first():
    with pytest.raises(InvalidArgument) as refused:
        keyed_items([("k", "h0"), ("other", "h1"), ("k", "h2")], 3)
    assert refused.value.reason == "DUPLICATE_IDEMPOTENCY_KEY"
    assert refused.value.details["index"] == "2"
    assert refused.value.message == "Memory at index 2: idempotency_key repeats the one at index 0"


def test_a_held_item_key_lends_its_memory_id():
    assert held_item_id(3, "h", ("h", ["m1"])) == "m1"


@pytest.mark.parametrize("held", [("another hash", ["m1"]), ("h", ["m1", "m2"]), ("h", [])])
def test_an_item_key_held_for_something_else_is_already_exists(held):
    with pytest.raises(AlreadyExists) as refused:
        held_item_id(3, "h", held)
    assert refused.value.reason == "IDEMPOTENCY_KEY_REUSED"
    assert refused.value.details["index"] == "3"
