"""gateway.translate: REST JSON <-> protobuf shapes."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import hypothesis
import pytest
from google.protobuf import json_format, struct_pb2
from hypothesis import strategies as st

from gateway.envelope import ApiError
from gateway.responses import Json
from gateway.translate import draft_from_json, memory_to_json, set_json_value, update_from_json
from memgrid.v1 import memory_pb2
from services.core.codec import memory_to_pb


def test_unknown_keys_are_ignored():
    pb = draft_from_json({"content": "hello", "id": "client-id", "format": "json", "offset": 3, "bogus": {"x": 1}})
    assert json_format.MessageToDict(pb) == {"content": "hello"}


def test_known_fields_are_carried():
    body = {
        "content": "hello",
        "type": "Decision",
        "confidence": 0.7,
        "importance": 1,
        "tags": ["a", "b:c"],
        "timestamp": "2024-01-15T10:30:00Z",
        "t_valid": "2024-01-16T00:00:00Z",
        "t_invalid": "2024-01-17T00:00:00Z",
        "updated_at": "2024-01-18T00:00:00Z",
        "last_accessed": "2024-01-19T00:00:00Z",
        "embedding": [0.1, 0.2],
    }
    pb = draft_from_json(body)
    assert (pb.content, pb.type, pb.confidence, pb.importance) == ("hello", "Decision", 0.7, 1.0)
    assert pb.timestamp == "2024-01-15T10:30:00Z"
    assert pb.last_accessed == "2024-01-19T00:00:00Z"
    assert json_format.MessageToDict(pb.tags) == ["a", "b:c"]
    assert json_format.MessageToDict(pb.embedding) == [0.1, 0.2]


#: Any value json.loads gives (decode_json bounds numbers to what a double holds).
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=12,
)


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(JSON_VALUES)
def test_a_json_value_is_set_as_protobufs_own_parser_sets_it(value):
    ours = struct_pb2.Value()
    set_json_value(ours, value)
    assert ours == json_format.ParseDict(value, struct_pb2.Value())


def test_a_draft_is_the_message_protobufs_own_parser_makes():
    body = {
        "content": "hello",
        "type": "Decision",
        "confidence": 1,
        "importance": 0.25,
        "tags": ["a", {"nested": [1, None, True]}],
        "embedding": [1, 2.5, -0.0, 2**60],
        "timestamp": "2024-01-15T10:30:00Z",
    }
    expected = json_format.ParseDict(body, memory_pb2.MemoryDraft())
    assert draft_from_json(body) == expected
    assert draft_from_json(body).SerializeToString(deterministic=True) == expected.SerializeToString(deterministic=True)


def test_string_tags_and_embedding_stay_strings():
    pb = draft_from_json({"content": "c", "tags": "a, b", "embedding": "0.1,0.2"})
    assert pb.tags.string_value == "a, b"
    assert pb.embedding.string_value == "0.1,0.2"


def test_metadata_is_serialised_to_metadata_json():
    metadata = {"source": "slack", "count": 3, "nested": {"list": [1, "two", None, True]}}
    pb = draft_from_json({"content": "c", "metadata": metadata})
    assert pb.HasField("metadata_json")
    assert json.loads(pb.metadata_json) == metadata


def test_null_or_missing_optional_fields_stay_unset():
    pb = draft_from_json({"content": "c", "metadata": None, "type": None, "importance": None})
    for name in ("metadata_json", "type", "importance", "confidence", "timestamp", "tags", "embedding"):
        assert not pb.HasField(name), name


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("content", 5),
        ("content", ["text"]),
        ("type", 3),
        ("timestamp", 1705314600),
        ("t_valid", []),
        ("t_invalid", {}),
        ("updated_at", 1.5),
        ("last_accessed", True),
        ("importance", "high"),
        ("importance", True),
        ("confidence", "0.9"),
        ("confidence", False),
        ("confidence", [0.9]),
    ],
)
def test_wrong_json_types_are_a_400_naming_the_field(field, value):
    body = {"content": "c", field: value}
    with pytest.raises(ApiError) as caught:
        draft_from_json(body)
    assert caught.value.code == 400
    assert f"'{field}'" in caught.value.message


@pytest.mark.parametrize("value", ["false", 0, 1, [True], {"a": 1}])
def test_a_patch_archived_must_be_a_boolean(value):
    with pytest.raises(ApiError) as caught:
        update_from_json({"archived": value})
    assert caught.value.code == 400 and "'archived'" in caught.value.message


def test_a_patch_carries_archived_in_the_draft_and_the_mask_but_a_create_ignores_it():
    draft, mask = update_from_json({"archived": False})
    assert draft.HasField("archived") and draft.archived is False and mask == ["archived"]
    _, mask = update_from_json({"archived": None})  # null reaches ingest, which refuses it by name
    assert mask == ["archived"]
    assert not draft_from_json({"content": "c", "archived": True}).HasField("archived")


def test_the_error_message_is_prefixed_with_where():
    with pytest.raises(ApiError) as caught:
        draft_from_json({"content": 1}, where="memories[2].")
    assert caught.value.message.startswith("memories[2].")
    assert "'content'" in caught.value.message


def test_memory_to_json_formats_times_with_a_plus_zero_offset(full_memory):
    out = memory_to_json(memory_to_pb(full_memory))
    assert out["timestamp"] == "2024-01-15T10:30:00.123456+00:00"
    assert out["t_invalid"] == "2030-12-31T23:59:59.999999+00:00"
    for name in ("timestamp", "t_valid", "t_invalid", "updated_at", "last_accessed", "enriched_at", "recorded_at"):
        assert out[name].endswith("+00:00"), name
        assert datetime.fromisoformat(out[name]) == getattr(full_memory, name), name


def test_memory_to_json_carries_every_field(full_memory):
    out = memory_to_json(memory_to_pb(full_memory))
    assert out["id"] == full_memory.id
    assert out["content"] == full_memory.content
    assert out["type"] == "Decision"
    assert out["confidence"] == 0.87
    assert out["importance"] == 0.35
    assert out["tags"] == full_memory.tags
    assert out["tag_prefixes"] == full_memory.tag_prefixes
    assert out["metadata"] == full_memory.metadata
    assert out["summary"] == full_memory.summary
    assert out["archived"] is True
    assert out["relevance_score"] == 0.42
    assert out["tenant"] == "acme"
    assert out["version"] == 7
    assert out["factuality"] == full_memory.factuality and "factuality" not in out["metadata"]


def test_float32_embeddings_come_back_in_shortest_form():
    pb = memory_pb2.Memory(id="m", content="c")
    pb.embedding.extend([0.1, 0.2, -0.3, 1.0, 1e-8])
    assert pb.embedding[0] != 0.1  # stored as float32
    body = json.loads(Json({"memory": memory_to_json(pb)}).body)
    assert body["memory"]["embedding"] == [0.1, 0.2, -0.3, 1.0, 1e-8]


def test_unset_fields_become_null():
    pb = memory_pb2.Memory(id="m", content="c")
    pb.timestamp.FromDatetime(datetime(2024, 1, 1, tzinfo=UTC))
    out = memory_to_json(pb)
    assert out["timestamp"] == "2024-01-01T00:00:00+00:00"
    assert out["t_invalid"] is None
    assert out["enriched_at"] is None
    assert out["relevance_score"] is None
    assert out["summary"] is None
    assert out["embedding"] is None
    assert out["metadata"] == {}
    assert out["factuality"] is None


def test_a_zero_relevance_score_is_kept():
    pb = memory_pb2.Memory(id="m", content="c", relevance_score=0.0)
    assert memory_to_json(pb)["relevance_score"] == 0.0


def test_embedding_can_be_left_out(full_memory):
    assert "embedding" not in memory_to_json(memory_to_pb(full_memory), with_embedding=False)
