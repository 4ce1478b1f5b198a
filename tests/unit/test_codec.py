"""Protobuf <-> domain conversion in services.core.codec."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from google.protobuf import json_format

from memgrid.v1 import events_pb2, memory_pb2
from services.core.codec import draft_from_pb, event_from_pb, event_to_pb, memory_from_pb, memory_to_pb
from services.core.domain.drafts import Draft
from services.core.domain.model import EventKind, MemoryEvent, Relation

OCCURRED = datetime(2024, 7, 8, 9, 10, 11, 121314, tzinfo=UTC)


def test_full_memory_round_trips(full_memory):
    assert memory_from_pb(memory_to_pb(full_memory)) == full_memory


def test_memory_survives_the_wire(full_memory):
    wire = memory_to_pb(full_memory).SerializeToString()
    assert memory_from_pb(memory_pb2.Memory.FromString(wire)) == full_memory


def test_pb_fields_carry_the_values(full_memory):
    pb = memory_to_pb(full_memory)
    assert json.loads(pb.metadata_json) == full_memory.metadata
    assert list(pb.tags) == full_memory.tags
    assert list(pb.embedding) == full_memory.embedding
    assert pb.t_invalid.ToDatetime(tzinfo=UTC) == full_memory.t_invalid
    assert pb.HasField("relevance_score")
    assert pb.version == 7
    assert json.loads(pb.factuality_json) == full_memory.factuality


def test_minimal_memory_round_trips_with_unset_fields(minimal_memory):
    pb = memory_to_pb(minimal_memory)
    for name in ("t_invalid", "enriched_at", "relevance_score"):
        assert not pb.HasField(name), name
    assert len(pb.embedding) == 0
    back = memory_from_pb(pb)
    assert back == minimal_memory
    assert back.t_invalid is None and back.enriched_at is None
    assert back.relevance_score is None and back.embedding is None
    assert pb.factuality_json == "" and back.factuality is None


def test_a_zero_relevance_score_is_not_lost(minimal_memory):
    minimal_memory.relevance_score = 0.0
    assert memory_from_pb(memory_to_pb(minimal_memory)).relevance_score == 0.0


def test_memory_without_embedding(full_memory):
    pb = memory_to_pb(full_memory, with_embedding=False)
    assert len(pb.embedding) == 0
    assert pb.content == full_memory.content


@pytest.mark.parametrize("kind", list(EventKind))
def test_event_round_trips_for_every_kind(kind, full_memory):
    event = MemoryEvent.for_memory(kind, full_memory, OCCURRED, content_changed=True)
    pb = event_to_pb(event)
    assert pb.kind != events_pb2.MEMORY_EVENT_KIND_UNSPECIFIED
    assert event_from_pb(events_pb2.MemoryEvent.FromString(pb.SerializeToString())) == event


def test_event_kinds_map_to_distinct_enum_values(full_memory):
    values = {event_to_pb(MemoryEvent.for_memory(kind, full_memory, OCCURRED)).kind for kind in EventKind}
    assert len(values) == len(EventKind)
    assert event_to_pb(MemoryEvent.for_memory(EventKind.DELETED, full_memory, OCCURRED)).kind == (
        events_pb2.MEMORY_EVENT_KIND_DELETED
    )


def test_deleted_and_associated_events_round_trip():
    deleted = MemoryEvent.deleted("acme", "m1", OCCURRED)
    back = event_from_pb(event_to_pb(deleted))
    assert back == deleted and back.relation is None and back.content_changed is False
    relation = Relation("m1", "m2", "PREFERS_OVER", 0.7, OCCURRED, {"reason": "faster"})
    associated = MemoryEvent.associated("acme", relation)
    pb = event_to_pb(associated)
    assert pb.relation.memory_id == "m2" and pb.memory_id == "m1"
    assert event_from_pb(events_pb2.MemoryEvent.FromString(pb.SerializeToString())) == associated


def test_events_are_thin():
    """Events say what changed; consumers read the record from the graph."""
    assert "memory" not in events_pb2.MemoryEvent.DESCRIPTOR.fields_by_name


def test_draft_with_only_content_keeps_the_rest_unset():
    assert draft_from_pb(memory_pb2.MemoryDraft(content="hello")) == Draft(content="hello")


def test_draft_keeps_explicit_zeros_and_empty_strings():
    pb = memory_pb2.MemoryDraft(content="c", type="", confidence=0.0, importance=0.0, metadata_json="")
    draft = draft_from_pb(pb)
    assert draft.type == ""
    assert draft.confidence == 0.0
    assert draft.importance == 0.0
    assert draft.metadata_json == ""
    assert draft.timestamp is None


def test_draft_carries_every_scalar_field():
    pb = memory_pb2.MemoryDraft(
        content="c",
        type="Decision",
        confidence=0.7,
        importance=0.2,
        metadata_json='{"a": 1}',
        timestamp="2024-01-01T00:00:00Z",
        t_valid="2024-01-02T00:00:00Z",
        t_invalid="2024-01-03T00:00:00Z",
        updated_at="2024-01-04T00:00:00Z",
        last_accessed="2024-01-05T00:00:00Z",
    )
    assert draft_from_pb(pb) == Draft(
        content="c",
        type="Decision",
        confidence=0.7,
        importance=0.2,
        metadata_json='{"a": 1}',
        timestamp="2024-01-01T00:00:00Z",
        t_valid="2024-01-02T00:00:00Z",
        t_invalid="2024-01-03T00:00:00Z",
        updated_at="2024-01-04T00:00:00Z",
        last_accessed="2024-01-05T00:00:00Z",
    )


@pytest.mark.parametrize(
    ("tags", "embedding"),
    [
        (["project:automem", "Decision"], [0.1, -0.2, 3.0]),
        ("project:automem, decision", "0.1, -0.2, 3"),
        ([], []),
    ],
)
def test_draft_values_become_python_lists_and_strings(tags, embedding):
    pb = json_format.ParseDict({"content": "c", "tags": tags, "embedding": embedding}, memory_pb2.MemoryDraft())
    draft = draft_from_pb(pb)
    assert draft.tags == tags
    assert type(draft.tags) is type(tags)
    assert draft.embedding == embedding
    assert type(draft.embedding) is type(embedding)


def test_draft_value_of_another_json_type_is_passed_on_for_validation():
    pb = json_format.ParseDict({"content": "c", "tags": {"a": 1}, "embedding": 5}, memory_pb2.MemoryDraft())
    draft = draft_from_pb(pb)
    assert draft.tags == {"a": 1}
    assert draft.embedding == 5
