"""Pure rules of the write path: PATCH, associations, supersession, ids, batches."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.core.domain.associations import DEFAULT_STRENGTH, build_relation, validate_relation_type
from services.core.domain.drafts import Draft, validate_batch_size
from services.core.domain.errors import InvalidArgument, NotFound
from services.core.domain.ids import stored_memory_id, validate_memory_id
from services.core.domain.limits import Limits
from services.core.domain.model import AUTHORABLE_RELATIONS, EventKind, Memory
from services.core.domain.supersede import close_superseded, supersession_edge, validate_supersede_relation
from services.core.domain.updates import apply_update, update_kind

T0 = datetime(2025, 1, 1, tzinfo=UTC)
NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)
A = "11111111-1111-4111-8111-111111111111"
B = "22222222-2222-4222-8222-222222222222"
LIMITS = Limits(vector_size=3)


def stored(**fields) -> Memory:
    values = dict(
        id=A, tenant="default", content="old text", type="Decision", confidence=0.9, importance=0.5,
        timestamp=T0, t_valid=T0, updated_at=T0, last_accessed=T0, recorded_at=T0,
        tags=["a"], tag_prefixes=["a"], metadata={"keep": 1}, embedding=[1.0, 0.0, 0.0], version=4,
    )  # fmt: skip
    values.update(fields)
    return Memory(**values)


def reason_of(call) -> str:
    with pytest.raises(InvalidArgument) as caught:
        call()
    return caught.value.reason


class TestApplyUpdate:
    def test_only_sent_fields_change_and_updated_at_moves_to_now(self):
        updated, changed = apply_update(stored(), Draft(importance=0.8), {"importance"}, now=NOW, limits=LIMITS)
        assert updated.importance == 0.8 and updated.content == "old text" and updated.metadata == {"keep": 1}
        assert updated.updated_at == NOW and updated.version == 5 and not changed

    def test_a_sent_updated_at_wins(self):
        updated, _ = apply_update(
            stored(), Draft(updated_at="2025-02-01T00:00:00Z"), {"updated_at"}, now=NOW, limits=LIMITS
        )
        assert updated.updated_at == datetime(2025, 2, 1, tzinfo=UTC)

    def test_metadata_is_replaced_wholesale(self):
        updated, _ = apply_update(stored(), Draft(metadata_json='{"new": 2}'), {"metadata"}, now=NOW, limits=LIMITS)
        assert updated.metadata == {"new": 2}

    def test_tags_are_normalised_and_prefixes_recomputed(self):
        updated, _ = apply_update(stored(), Draft(tags=["x, Y:z ", "", "x"]), {"tags"}, now=NOW, limits=LIMITS)
        assert updated.tags == ["x", "Y:z"] and updated.tag_prefixes == ["x", "y", "y:z"]

    def test_a_content_change_is_reported_and_drops_the_stale_vector(self):
        updated, changed = apply_update(stored(), Draft(content="new text"), {"content"}, now=NOW, limits=LIMITS)
        assert changed and updated.embedding is None
        same, unchanged = apply_update(stored(), Draft(content="old text"), {"content"}, now=NOW, limits=LIMITS)
        assert not unchanged and same.embedding == [1.0, 0.0, 0.0]

    def test_a_content_change_makes_the_memory_unenriched_so_a_failed_enrichment_is_re_driven(self):
        enriched = stored(enriched_at=T0, summary="Old text.")
        updated, _ = apply_update(enriched, Draft(content="new text"), {"content"}, now=NOW, limits=LIMITS)
        assert updated.enriched_at is None and updated.summary == ""
        same, _ = apply_update(enriched, Draft(importance=0.1), {"importance"}, now=NOW, limits=LIMITS)
        assert same.enriched_at == T0 and same.summary == "Old text."

    def test_null_clears_t_invalid_but_not_content(self):
        updated, _ = apply_update(stored(t_invalid=NOW), Draft(), {"t_invalid"}, now=NOW, limits=LIMITS)
        assert updated.t_invalid is None
        assert reason_of(lambda: apply_update(stored(), Draft(), {"content"}, now=NOW, limits=LIMITS)) == (
            "NULL_NOT_ALLOWED"
        )

    def test_a_patch_is_held_to_the_write_side_limits(self):
        tight = Limits(vector_size=3, max_tags=2, max_tag_chars=5, max_tag_segments=2, max_metadata_bytes=20)
        for tags, reason in (
            (["a", "b", "c"], "TOO_MANY_TAGS"),
            (["abcdef"], "TAG_TOO_LONG"),
            (["a:b:c"], "TAG_TOO_DEEP"),
        ):
            assert (
                reason_of(lambda t=tags: apply_update(stored(), Draft(tags=t), {"tags"}, now=NOW, limits=tight))
                == reason
            )
        big = Draft(metadata_json='{"k": "' + "v" * 20 + '"}')
        assert (
            reason_of(lambda: apply_update(stored(), big, {"metadata"}, now=NOW, limits=tight)) == "METADATA_TOO_LARGE"
        )
        # A comma-separated string is split first: the limits apply to the tags it makes.
        updated, _ = apply_update(stored(), Draft(tags="a, b"), {"tags"}, now=NOW, limits=tight)
        assert updated.tags == ["a", "b"]

    def test_archived_true_archives_now_and_false_restores(self):
        archived, changed = apply_update(stored(), Draft(archived=True), {"archived"}, now=NOW, limits=LIMITS)
        assert archived.archived and archived.archived_at == NOW and archived.version == 5 and not changed
        assert update_kind(stored(), archived, changed) is EventKind.ARCHIVED
        archived.relevance_score = 0.05  # what forgetting archived it for
        later = NOW + timedelta(days=1)
        restored, _ = apply_update(archived, Draft(archived=False), {"archived"}, now=later, limits=LIMITS)
        assert not restored.archived and restored.archived_at is None and restored.version == 6
        assert update_kind(archived, restored, False) is EventKind.RESTORED
        # A restore counts as a use and drops the old score: no forget pass re-archives it before decay re-scores.
        assert restored.relevance_score is None and restored.last_accessed == later
        sent, _ = apply_update(
            archived, Draft(archived=False, last_accessed="2026-01-01T00:00:00Z"), {"archived", "last_accessed"},
            now=later, limits=LIMITS,
        )  # fmt: skip
        assert sent.last_accessed == datetime(2026, 1, 1, tzinfo=UTC)
        untouched, _ = apply_update(stored(relevance_score=0.4), Draft(archived=False), {"archived"}, now=NOW,
                                    limits=LIMITS)  # fmt: skip
        assert untouched.relevance_score == 0.4 and untouched.last_accessed == T0

    def test_archiving_an_archived_memory_keeps_its_archived_at(self):
        before = stored(archived=True, archived_at=T0)
        again, _ = apply_update(before, Draft(archived=True), {"archived"}, now=NOW, limits=LIMITS)
        assert again.archived_at == T0 and update_kind(before, again, False) is EventKind.UPDATED

    def test_a_content_change_with_the_flag_is_an_update(self):
        # enrichment re-embeds on UPDATED with content_changed: the flag must not hide it.
        updated, changed = apply_update(
            stored(), Draft(content="new", archived=True), {"content", "archived"}, now=NOW, limits=LIMITS
        )
        assert updated.archived and changed and update_kind(stored(), updated, changed) is EventKind.UPDATED

    @pytest.mark.parametrize(
        "draft, fields, reason",
        [
            (Draft(archived="no"), {"archived"}, "INVALID_ARCHIVED"),
            (Draft(), {"archived"}, "NULL_NOT_ALLOWED"),
            (Draft(importance=2.0), {"importance"}, "OUT_OF_RANGE"),
            (Draft(content="x" * 2001), {"content"}, "CONTENT_TOO_LONG"),
            (Draft(timestamp="nope"), {"timestamp"}, "INVALID_TIMESTAMP"),
            (Draft(tags=5), {"tags"}, "INVALID_TAGS"),
            (Draft(metadata_json="[1]"), {"metadata"}, "INVALID_METADATA"),
            (Draft(), set(), "EMPTY_UPDATE"),
            (Draft(), {"tenant"}, "FIELD_NOT_UPDATABLE"),
        ],
    )
    def test_bad_updates_are_refused(self, draft, fields, reason):
        assert reason_of(lambda: apply_update(stored(), draft, fields, now=NOW, limits=LIMITS)) == reason


class TestAssociations:
    def test_types_are_case_insensitive_and_system_types_refused(self):
        assert validate_relation_type("relates_to") == "RELATES_TO"
        assert len(AUTHORABLE_RELATIONS) == 11
        for system in ("SIMILAR_TO", "PRECEDED_BY", "DISCOVERED"):
            assert reason_of(lambda s=system: validate_relation_type(s)) == "SYSTEM_RELATION"
        assert reason_of(lambda: validate_relation_type("LIKES")) == "UNKNOWN_RELATION"

    def test_defaults_and_per_type_properties(self):
        relation = build_relation(A, B, "prefers_over", None, {"reason": "r", "context": "c", "junk": 1}, now=NOW)
        assert relation.strength == DEFAULT_STRENGTH
        assert relation.properties == {"reason": "r", "context": "c"}
        assert relation.source_id == A and relation.target_id == B and relation.created_at == NOW

    @pytest.mark.parametrize("kind", [None, ""])
    def test_no_type_is_relates_to(self, kind):
        relation = build_relation(A, B, kind, None, {}, now=NOW)
        assert (relation.type, relation.strength) == ("RELATES_TO", DEFAULT_STRENGTH)

    @pytest.mark.parametrize(
        "args, reason",
        [
            ((A, A, "RELATES_TO", None, {}), "SAME_MEMORY"),
            ((A, "", "RELATES_TO", None, {}), "INVALID_ID"),
            (("nope", "nope", "RELATES_TO", None, {}), "SAME_MEMORY"),
            ((A, "nope", "FRIENDS_WITH", None, {}), "UNKNOWN_RELATION"),
            ((A, B, "RELATES_TO", 1.5, {}), "OUT_OF_RANGE"),
            ((A, B, "RELATES_TO", True, {}), "OUT_OF_RANGE"),
            ((A, B, "  ", None, {}), "RELATION_TYPE_REQUIRED"),
            ((A, B, "PREFERS_OVER", None, {"reason": ["a list"]}), "INVALID_PROPERTY"),
        ],
    )
    def test_bad_associations(self, args, reason):
        assert reason_of(lambda: build_relation(*args, now=NOW)) == reason

    def test_an_id_that_is_no_uuid_is_not_found_once_the_rest_is_valid(self):
        with pytest.raises(NotFound) as caught:
            build_relation(A, "nope", "RELATES_TO", None, {}, now=NOW)
        assert (caught.value.reason, caught.value.field) == ("MEMORY_NOT_FOUND", "memory2_id")


class TestSupersede:
    def test_relation_defaults_and_validation(self):
        assert validate_supersede_relation(None) == "INVALIDATED_BY"
        assert validate_supersede_relation("evolved_into") == "EVOLVED_INTO"
        assert reason_of(lambda: validate_supersede_relation("RELATES_TO")) == "INVALID_SUPERSEDE_RELATION"

    def test_the_old_memory_closes_now_and_points_at_its_replacement(self):
        old, new = stored(), stored(id=B, content="new")
        closed = close_superseded(old, new, reason="wrong", now=NOW)
        assert closed.t_invalid == NOW and closed.superseded_at == NOW and closed.version == old.version + 1
        assert closed.metadata == {"keep": 1, "superseded_by": B, "supersede_reason": "wrong"}
        edge = supersession_edge(old, new, "INVALIDATED_BY", reason="wrong", now=NOW)
        assert (edge.source_id, edge.target_id, edge.properties) == (A, B, {"reason": "wrong"})

    def test_an_earlier_expiry_is_kept(self):
        earlier = NOW - timedelta(days=3)
        closed = close_superseded(stored(t_invalid=earlier), stored(id=B), reason="", now=NOW)
        assert closed.t_invalid == earlier and "supersede_reason" not in closed.metadata


def test_memory_ids_are_uuids():
    assert validate_memory_id(A.upper()) == A
    for bad in ("abc", "", None, 5):
        assert reason_of(lambda b=bad: validate_memory_id(b)) == "INVALID_ID"


def test_an_id_to_update_or_delete_that_is_no_uuid_names_no_memory():
    assert stored_memory_id(A.upper()) == A
    for missing in ("abc", "nonexistent-id"):
        with pytest.raises(NotFound) as caught:
            stored_memory_id(missing)
        assert (caught.value.reason, caught.value.field) == ("MEMORY_NOT_FOUND", "id")
    for bad in ("", "  ", None, 5):
        assert reason_of(lambda b=bad: stored_memory_id(b)) == "INVALID_ID"


def test_batch_size_bounds():
    validate_batch_size(1, LIMITS)
    validate_batch_size(500, LIMITS)
    assert reason_of(lambda: validate_batch_size(0, LIMITS)) == "BATCH_EMPTY"
    assert reason_of(lambda: validate_batch_size(501, LIMITS)) == "BATCH_TOO_LARGE"
