"""build_memory and its validators against the POST /memory rules."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from services.core.domain.classification import Classification
from services.core.domain.drafts import Draft, build_memory
from services.core.domain.errors import InvalidArgument
from services.core.domain.limits import Limits

NOW = datetime(2025, 6, 1, 12, 0, 0, 250000, tzinfo=UTC)
CLASSIFIED = Classification("Insight", 0.6)


class RecordingClassifier:
    """A classify callable that answers CLASSIFIED and records its calls."""

    def __init__(self, answer: Classification = CLASSIFIED):
        self.answer = answer
        self.calls: list[str] = []

    def __call__(self, content: str) -> Classification:
        self.calls.append(content)
        return self.answer


def build(limits: Limits | None = None, classify=None, **fields):
    fields.setdefault("content", "Something worth remembering")
    return build_memory(
        Draft(**fields),
        memory_id="mem-1",
        tenant="acme",
        now=NOW,
        limits=limits or Limits(),
        classify=classify or RecordingClassifier(),
    )


def rejected(limits: Limits | None = None, **fields) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as caught:
        build(limits, **fields)
    assert caught.value.status == "INVALID_ARGUMENT"
    return caught.value


# -- content ---------------------------------------------------------------


def test_content_is_required():
    err = rejected(content=None)
    assert err.reason == "CONTENT_REQUIRED"
    assert err.field == "content"


def test_empty_content_is_rejected():
    err = rejected(content="")
    assert err.reason == "CONTENT_EMPTY"
    assert err.field == "content"


@pytest.mark.parametrize("content", [42, ["a"], {"text": "a"}, b"bytes"])
def test_content_must_be_a_string(content):
    err = rejected(content=content)
    assert err.reason == "CONTENT_NOT_TEXT"
    assert err.field == "content"


def test_content_over_the_hard_limit_is_rejected_with_length_and_limit():
    err = rejected(content="x" * 2001)
    assert err.reason == "CONTENT_TOO_LONG"
    assert err.field == "content"
    assert int(err.details["length"]) == 2001
    assert int(err.details["limit"]) == 2000
    assert "2001" in err.message and "2000" in err.message


def test_content_of_exactly_the_hard_limit_is_accepted():
    content = "é" * 2000  # characters, not UTF-8 bytes
    assert build(content=content).content == content


def test_content_is_stored_unchanged():
    memory = build(content="  keep my spacing  ")
    assert memory.content == "  keep my spacing  "
    assert (memory.id, memory.tenant) == ("mem-1", "acme")


# -- importance and confidence ---------------------------------------------


def test_importance_defaults_to_one_half():
    assert build().importance == 0.5


@pytest.mark.parametrize("value", [0, 0.0, 0.37, 1, 1.0])
def test_importance_accepts_the_closed_unit_interval(value):
    memory = build(importance=value)
    assert memory.importance == float(value)
    assert isinstance(memory.importance, float)


@pytest.mark.parametrize("field", ["importance", "confidence"])
@pytest.mark.parametrize("value", [-0.01, 1.01, -1, 2, float("inf")])
def test_out_of_range_numbers_are_rejected(field, value):
    err = rejected(type="Decision", **{field: value})
    assert err.reason == "OUT_OF_RANGE"
    assert err.field == field


@pytest.mark.parametrize("field", ["importance", "confidence"])
@pytest.mark.parametrize("value", [True, False, "0.5", "high", [0.5], {"v": 0.5}])
def test_non_numbers_are_rejected(field, value):
    err = rejected(type="Decision", **{field: value})
    assert err.reason == "NOT_A_NUMBER"
    assert err.field == field


@pytest.mark.parametrize("field", ["importance", "confidence"])
def test_nan_is_rejected(field):
    err = rejected(type="Decision", **{field: float("nan")})
    assert err.field == field


# -- type and confidence ---------------------------------------------------


def test_explicit_type_defaults_confidence_to_0_9_without_classifying():
    classify = RecordingClassifier()
    memory = build(type="Decision", classify=classify)
    assert (memory.type, memory.confidence) == ("Decision", 0.9)
    assert classify.calls == []


def test_explicit_type_is_stored_as_sent_even_if_unknown():
    classify = RecordingClassifier()
    memory = build(type="banana", classify=classify)
    assert memory.type == "banana"
    assert memory.confidence == 0.9
    assert classify.calls == []


def test_explicit_type_keeps_its_spelling():
    # No TYPE_ALIASES mapping for explicit types: "decision" is not "Decision".
    assert build(type="decision").type == "decision"


@pytest.mark.parametrize("confidence", [0.0, 0.42, 1.0])
def test_explicit_type_keeps_the_sent_confidence(confidence):
    memory = build(type="Habit", confidence=confidence)
    assert (memory.type, memory.confidence) == ("Habit", confidence)


def test_without_type_the_classifier_decides():
    classify = RecordingClassifier(Classification("Pattern", 0.8))
    memory = build(content="We usually and typically do this", classify=classify)
    assert classify.calls == ["We usually and typically do this"]
    assert (memory.type, memory.confidence) == ("Pattern", 0.8)


def test_confidence_without_type_is_ignored():
    classify = RecordingClassifier(Classification("Memory", 0.3))
    memory = build(confidence=0.99, classify=classify)
    assert (memory.type, memory.confidence) == ("Memory", 0.3)
    assert len(classify.calls) == 1


def test_invalid_confidence_without_type_is_ignored_not_rejected():
    memory = build(confidence=5.0, classify=RecordingClassifier(Classification("Context", 0.6)))
    assert memory.confidence == 0.6


# -- tags ------------------------------------------------------------------


def test_tags_list_is_stored_as_sent_with_prefixes():
    memory = build(tags=["Project:AutoMem:API", "decision", "", " Team/Backend "])
    assert memory.tags == ["Project:AutoMem:API", "decision", "", " Team/Backend "]
    assert sorted(memory.tag_prefixes) == sorted(
        ["project", "project:automem", "project:automem:api", "decision", "team", "team/backend"]
    )
    assert len(memory.tag_prefixes) == len(set(memory.tag_prefixes))


def test_a_single_string_tag_is_one_tag_not_split_on_commas():
    memory = build(tags="project:automem, decision")
    assert memory.tags == ["project:automem, decision"]
    assert "decision" not in memory.tag_prefixes
    assert "project" in memory.tag_prefixes


def test_no_tags_means_empty_lists():
    memory = build()
    assert memory.tags == []
    assert memory.tag_prefixes == []


@pytest.mark.parametrize("tags", [5, 1.5, True, {"a": "b"}, ["ok", 3], [["nested"]], ["a", None]])
def test_tags_of_other_types_are_rejected(tags):
    err = rejected(tags=tags)
    assert err.reason == "INVALID_TAGS"
    assert err.field == "tags"
    assert err.details["field"] == "tags"


TIGHT = Limits(max_tags=3, max_tag_chars=8, max_tag_segments=3, max_metadata_bytes=40)


def test_tags_within_the_limits_pass():
    assert build(TIGHT, tags=["a", "b:c:d", "12345678"]).tags == ["a", "b:c:d", "12345678"]


@pytest.mark.parametrize(
    "tags, reason, named",
    [
        (["a", "b", "c", "d"], "TOO_MANY_TAGS", "'tags' holds 4 tags; the limit is 3"),
        (["ok", "123456789"], "TAG_TOO_LONG", "'tags[1]' is 9 characters; the limit is 8"),
        (["a:b/c:d"], "TAG_TOO_DEEP", "'tags[0]' has 4 segments"),
        (["::::"], "TAG_TOO_DEEP", "'tags[0]' has 5 segments"),
    ],
)
def test_tags_past_a_limit_are_a_400_naming_the_tag(tags, reason, named):
    err = rejected(TIGHT, tags=tags)
    assert (err.reason, err.field) == (reason, "tags")
    assert named in err.message


def test_the_default_tag_limits():
    defaults = Limits()
    assert (defaults.max_tags, defaults.max_tag_chars, defaults.max_tag_segments) == (50, 128, 10)
    assert build(tags=["t"] * 50).tags == ["t"] * 50
    assert rejected(tags=["t"] * 51).reason == "TOO_MANY_TAGS"
    assert rejected(tags=["a:" * 50_000]).reason == "TAG_TOO_LONG"
    assert rejected(tags=["a:" * 10]).reason == "TAG_TOO_DEEP"  # 20 characters, 11 segments


def test_metadata_past_its_size_as_stored_json_is_a_400():
    assert build(TIGHT, metadata_json=json.dumps({"k": "v" * 31})).metadata == {"k": "v" * 31}  # 40 bytes: the limit
    err = rejected(TIGHT, metadata_json=json.dumps({"k": "v" * 32}))
    assert (err.reason, err.field) == ("METADATA_TOO_LARGE", "metadata")
    assert "'metadata' is 41 bytes as JSON; the limit is 40" in err.message
    # UTF-8 bytes, not characters (25 here) nor the \u escapes the gateway's JSON text holds.
    err = rejected(TIGHT, metadata_json=json.dumps({"k": "é" * 16}))
    assert err.reason == "METADATA_TOO_LARGE" and "41 bytes" in err.message
    assert rejected(metadata_json=json.dumps({"k": "x" * 16 * 1024})).reason == "METADATA_TOO_LARGE"


def test_the_original_content_a_summary_replaced_is_not_the_clients_metadata():
    memory = build(TIGHT, metadata_json=json.dumps({"k": "v" * 30}), original_content="long " * 100)
    assert memory.metadata == {"k": "v" * 30, "original_content": "long " * 100}


# -- metadata --------------------------------------------------------------


def test_metadata_object_is_parsed_with_nested_values_and_ints():
    metadata = {"source": "slack", "count": 3, "nested": {"items": [1, 2.5, "x"], "ok": True}}
    memory = build(metadata_json=json.dumps(metadata))
    assert memory.metadata == metadata
    assert isinstance(memory.metadata["count"], int)


@pytest.mark.parametrize("metadata_json", [None, "null"])
def test_missing_or_null_metadata_is_an_empty_object(metadata_json):
    assert build(metadata_json=metadata_json).metadata == {}


@pytest.mark.parametrize("metadata_json", ["[1, 2]", "3", '"text"', "true", "{not json", ""])
def test_metadata_must_be_a_json_object(metadata_json):
    err = rejected(metadata_json=metadata_json)
    assert err.reason == "INVALID_METADATA"
    assert err.field == "metadata"


# -- timestamps ------------------------------------------------------------


def test_timestamp_defaults_to_now_and_the_other_times_follow_it():
    memory = build()
    assert memory.timestamp == NOW
    assert memory.t_valid == NOW
    assert memory.updated_at == NOW
    assert memory.last_accessed == NOW
    assert memory.recorded_at == NOW
    assert memory.t_invalid is None


def test_z_suffix_is_utc():
    memory = build(timestamp="2024-01-15T10:30:00Z")
    assert memory.timestamp == datetime(2024, 1, 15, 10, 30, tzinfo=UTC)
    assert memory.timestamp.utcoffset() == timedelta(0)


def test_offsets_are_converted_to_utc():
    memory = build(timestamp="2024-01-15T12:30:00.5+02:00")
    assert memory.timestamp == datetime(2024, 1, 15, 10, 30, 0, 500000, tzinfo=UTC)
    assert memory.timestamp.utcoffset() == timedelta(0)
    assert memory.timestamp.hour == 10


def test_naive_timestamps_are_utc():
    memory = build(timestamp="2024-01-15T10:30:00")
    assert memory.timestamp == datetime(2024, 1, 15, 10, 30, tzinfo=UTC)
    assert memory.timestamp.tzinfo is not None


def test_t_valid_and_updated_at_default_to_timestamp_and_last_accessed_to_updated_at():
    memory = build(timestamp="2024-01-15T10:30:00Z")
    sent = datetime(2024, 1, 15, 10, 30, tzinfo=UTC)
    assert memory.t_valid == sent
    assert memory.updated_at == sent
    assert memory.last_accessed == sent
    assert memory.recorded_at == NOW


def test_last_accessed_defaults_to_a_sent_updated_at():
    memory = build(timestamp="2024-01-15T10:30:00Z", updated_at="2024-02-01T00:00:00Z")
    assert memory.updated_at == datetime(2024, 2, 1, tzinfo=UTC)
    assert memory.last_accessed == datetime(2024, 2, 1, tzinfo=UTC)
    assert memory.t_valid == datetime(2024, 1, 15, 10, 30, tzinfo=UTC)


def test_every_sent_time_is_kept():
    memory = build(
        timestamp="2024-01-01T00:00:00Z",
        t_valid="2024-01-02T00:00:00Z",
        t_invalid="2024-01-03T00:00:00+01:00",
        updated_at="2024-01-04T00:00:00Z",
        last_accessed="2024-01-05T00:00:00Z",
    )
    assert memory.timestamp == datetime(2024, 1, 1, tzinfo=UTC)
    assert memory.t_valid == datetime(2024, 1, 2, tzinfo=UTC)
    assert memory.t_invalid == datetime(2024, 1, 2, 23, tzinfo=UTC)
    assert memory.updated_at == datetime(2024, 1, 4, tzinfo=UTC)
    assert memory.last_accessed == datetime(2024, 1, 5, tzinfo=UTC)


@pytest.mark.parametrize("field", ["timestamp", "t_valid", "t_invalid", "updated_at", "last_accessed"])
@pytest.mark.parametrize("value", ["not-a-date", "2024-13-01T00:00:00Z", "", "yesterday at noon"])
def test_invalid_timestamps_are_rejected_naming_the_field(field, value):
    err = rejected(**{field: value})
    assert err.reason == "INVALID_TIMESTAMP"
    assert err.field == field
    assert field in err.message


# -- embedding -------------------------------------------------------------

SMALL = Limits(vector_size=4)


def test_embedding_defaults_to_none():
    assert build(SMALL).embedding is None


def test_embedding_as_a_list_of_numbers():
    memory = build(SMALL, embedding=[0.1, -2, 3.5, 0])
    assert memory.embedding == [0.1, -2.0, 3.5, 0.0]
    assert all(isinstance(v, float) for v in memory.embedding)


def test_embedding_as_a_comma_separated_string():
    assert build(SMALL, embedding="0.1, -2,3.5 ,0").embedding == [0.1, -2.0, 3.5, 0.0]


@pytest.mark.parametrize("embedding", [[0.1, 0.2, 0.3], [0.1] * 5, "1,2,3", []])
def test_embedding_of_the_wrong_length_is_rejected(embedding):
    err = rejected(SMALL, embedding=embedding)
    assert err.reason == "EMBEDDING_DIMENSION_MISMATCH"
    assert err.field == "embedding"
    assert int(err.details["length"]) == len(embedding if isinstance(embedding, list) else embedding.split(","))
    assert int(err.details["expected"]) == 4


def test_embedding_size_follows_the_limits():
    err = rejected(Limits(vector_size=8), embedding=[0.0] * 4)
    assert err.reason == "EMBEDDING_DIMENSION_MISMATCH"
    assert int(err.details["expected"]) == 8


@pytest.mark.parametrize(
    "embedding",
    ["a,b,c,d", "0.1,0.2,x,0.4", [0.1, "0.2", 0.3, 0.4], [0.1, None, 0.3, 0.4], [True, 0.0, 0.0, 0.0], 7, {"v": 1}],
)
def test_non_numeric_embeddings_are_rejected(embedding):
    err = rejected(SMALL, embedding=embedding)
    assert err.reason == "INVALID_EMBEDDING"
    assert err.field == "embedding"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1e308, -3.5e38])
def test_non_finite_embedding_values_are_rejected(value):
    """1e308 is a finite double but infinity as the float32 it is stored as
    (GET /memory/{id} then answered 500: found beside the fuzzer)."""
    err = rejected(SMALL, embedding=[0.1, value, 0.3, 0.4])
    assert err.reason == "INVALID_EMBEDDING"
