"""Protobuf <-> domain conversion, used by servicers and the event adapter.

Protobuf types stop here: handlers and the domain see dataclasses only.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from google.protobuf import json_format, timestamp_pb2

from memgrid.v1 import events_pb2, memory_pb2
from services.core.domain.drafts import Draft
from services.core.domain.model import TIME_FIELDS, ComponentStatus, EventKind, Memory, MemoryEvent, Relation
from services.core.domain.times import from_micros, to_micros

_KIND_TO_PB = {kind: getattr(events_pb2, f"MEMORY_EVENT_KIND_{kind.name}") for kind in EventKind}
_PB_TO_KIND = {v: k for k, v in _KIND_TO_PB.items()}
# Timestamps convert through epoch microseconds: protobuf's FromDatetime and
# ToDatetime are Python and cost twice as much, and a recall converts a few
# hundred times.


def ts_to_pb(value: datetime | None) -> timestamp_pb2.Timestamp | None:
    if value is None:
        return None
    seconds, micros = divmod(to_micros(value.astimezone(UTC)), 1_000_000)
    return timestamp_pb2.Timestamp(seconds=seconds, nanos=micros * 1000)


def ts_from_pb(message, field: str) -> datetime | None:
    """The datetime in `message.field` (to the microsecond), or None when the field is unset."""
    if not message.HasField(field):
        return None
    value = getattr(message, field)
    return from_micros(value.seconds * 1_000_000 + value.nanos // 1000)


def memory_to_pb(memory: Memory, *, with_embedding: bool = True) -> memory_pb2.Memory:
    pb = memory_pb2.Memory(
        id=memory.id,
        tenant=memory.tenant,
        content=memory.content,
        type=memory.type,
        confidence=memory.confidence,
        importance=memory.importance,
        tags=memory.tags,
        tag_prefixes=memory.tag_prefixes,
        metadata_json=json.dumps(memory.metadata, ensure_ascii=False),
        summary=memory.summary,
        archived=memory.archived,
        version=memory.version,
        factuality_json="" if memory.factuality is None else json.dumps(memory.factuality, ensure_ascii=False),
        trust_state=memory.trust_state,
        review_rule=memory.review_rule,
    )
    if with_embedding and memory.embedding is not None:
        pb.embedding.extend(memory.embedding)
    if memory.relevance_score is not None:
        pb.relevance_score = memory.relevance_score
    for name in TIME_FIELDS:
        value = getattr(memory, name)
        if value is not None:
            getattr(pb, name).CopyFrom(ts_to_pb(value))
    return pb


def memory_from_pb(pb: memory_pb2.Memory) -> Memory:
    # Any: Memory's own fields say which times are required (a memory's message has each of those).
    times: dict[str, Any] = {name: ts_from_pb(pb, name) for name in TIME_FIELDS}
    return Memory(
        id=pb.id,
        tenant=pb.tenant,
        content=pb.content,
        type=pb.type,
        confidence=pb.confidence,
        importance=pb.importance,
        tags=list(pb.tags),
        tag_prefixes=list(pb.tag_prefixes),
        metadata=json.loads(pb.metadata_json or "{}"),
        embedding=list(pb.embedding) or None,
        summary=pb.summary,
        archived=pb.archived,
        relevance_score=pb.relevance_score if pb.HasField("relevance_score") else None,
        version=pb.version,
        factuality=json.loads(pb.factuality_json) if pb.factuality_json else None,
        trust_state=pb.trust_state or "active",
        review_rule=pb.review_rule,
        **times,
    )


def _value_or_none(message, field: str):
    if not message.HasField(field):
        return None
    value = getattr(message, field)
    # A list of strings (a draft's tags, nearly always) read directly: what
    # MessageToDict makes of it, without its generic walk (4% of ingest's CPU in a batch).
    if value.WhichOneof("kind") == "list_value":
        items = value.list_value.values
        if all(item.WhichOneof("kind") == "string_value" for item in items):
            return [item.string_value for item in items]
    return json_format.MessageToDict(value)


def draft_from_pb(pb: memory_pb2.MemoryDraft) -> Draft:
    """What the client sent; optional fields not sent stay None."""

    def opt(name: str):
        return getattr(pb, name) if pb.HasField(name) else None

    return Draft(
        content=pb.content,
        type=opt("type"),
        confidence=opt("confidence"),
        importance=opt("importance"),
        tags=_value_or_none(pb, "tags"),
        metadata_json=opt("metadata_json"),
        timestamp=opt("timestamp"),
        t_valid=opt("t_valid"),
        t_invalid=opt("t_invalid"),
        updated_at=opt("updated_at"),
        last_accessed=opt("last_accessed"),
        embedding=_value_or_none(pb, "embedding"),
        archived=opt("archived"),
        trust_state=opt("trust_state"),
    )


def event_to_pb(event: MemoryEvent) -> events_pb2.MemoryEvent:
    pb = events_pb2.MemoryEvent(
        event_id=event.event_id,
        tenant=event.tenant,
        kind=_KIND_TO_PB[event.kind],
        memory_id=event.memory_id,
        version=event.version,
        content_changed=event.content_changed,
        has_embedding=event.has_embedding,
        trust_state=event.trust_state,
        previous_trust_state=event.previous_trust_state,
        reason=event.reason,
        forced=event.forced,
        tombstone_id=event.tombstone_id,
    )
    pb.occurred_at.CopyFrom(ts_to_pb(event.occurred_at))
    if event.relation is not None:
        pb.relation.CopyFrom(relation_to_pb(event.relation))
    return pb


def event_from_pb(pb: events_pb2.MemoryEvent) -> MemoryEvent:
    return MemoryEvent(
        event_id=pb.event_id,
        tenant=pb.tenant,
        kind=_PB_TO_KIND[pb.kind],
        memory_id=pb.memory_id,
        version=pb.version,
        occurred_at=pb.occurred_at.ToDatetime(tzinfo=UTC),
        content_changed=pb.content_changed,
        has_embedding=pb.has_embedding,
        trust_state=pb.trust_state,
        previous_trust_state=pb.previous_trust_state,
        reason=pb.reason,
        forced=pb.forced,
        tombstone_id=pb.tombstone_id,
        relation=relation_from_pb(pb.memory_id, pb.relation) if pb.HasField("relation") else None,
    )


def relation_to_pb(relation: Relation) -> memory_pb2.Relation:
    """The edge as seen from its source: memory_id is the target."""
    pb = memory_pb2.Relation(
        memory_id=relation.target_id,
        type=relation.type,
        direction=memory_pb2.RELATION_DIRECTION_OUTGOING,
        strength=relation.strength,
        properties_json=json.dumps(relation.properties, ensure_ascii=False),
    )
    pb.created_at.CopyFrom(ts_to_pb(relation.created_at))
    return pb


def relation_seen_from(memory_id: str, relation: Relation) -> memory_pb2.Relation:
    """The edge as listed on one of its ends: memory_id is the other end."""
    pb = relation_to_pb(relation)
    if relation.source_id != memory_id:
        pb.memory_id = relation.source_id
        pb.direction = memory_pb2.RELATION_DIRECTION_INCOMING
    return pb


def relation_from_pb(source_id: str, pb: memory_pb2.Relation) -> Relation:
    return Relation(
        source_id=source_id,
        target_id=pb.memory_id,
        type=pb.type,
        strength=pb.strength,
        created_at=pb.created_at.ToDatetime(tzinfo=UTC),
        properties=json.loads(pb.properties_json or "{}"),
    )


def status_to_pb(status: ComponentStatus) -> memory_pb2.ComponentStatus:
    return memory_pb2.ComponentStatus(
        name=status.name, status=status.status, detail=status.detail, figures=status.figures
    )
