"""REST JSON <-> protobuf. Shape only: every rule is the services' to apply."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import numpy as np
from google.protobuf import struct_pb2

from gateway.envelope import ApiError, from_domain
from memgrid.v1 import ingest_service_pb2, memory_pb2
from services.core.codec import ts_from_pb
from services.core.domain.batch import at_index
from services.core.domain.drafts import require_content, unit_interval_number
from services.core.domain.errors import DomainError
from services.core.domain.model import TIME_FIELDS
from services.core.domain.times import format_iso
from services.core.domain.updates import validate_archived

#: Fields of a memory draft the REST surface accepts; others are ignored
#: (clients send id, format, offset... which the reference ignores too).
DRAFT_FIELDS = (
    "content",
    "type",
    "confidence",
    "importance",
    "tags",
    "timestamp",
    "t_valid",
    "t_invalid",
    "updated_at",
    "last_accessed",
    "embedding",
)


def require_object(body: Any, what: str = "request body") -> dict:
    """`body` when it is a JSON object; else a 400 naming `what` (BODY_NOT_OBJECT for the body itself)."""
    if not isinstance(body, dict):
        reason = "BODY_NOT_OBJECT" if what == "request body" else "NOT_AN_OBJECT"
        raise ApiError(400, f"{what} must be a JSON object", reason)
    return body


#: Draft fields of type google.protobuf.Value: any JSON value, which ingest reads.
VALUE_FIELDS = ("tags", "embedding")


def draft_from_json(body: dict, *, where: str = "", index: int | None = None) -> memory_pb2.MemoryDraft:
    """A MemoryDraft from a JSON object; a wrong JSON type is a 400 naming the
    field, after `where` (a batch item's `index` by default, which must carry
    content). The rules the domain owns are its own, their refusal mapped
    (from_domain). The body comes from decode_json, so its numbers fit a
    double and its strings hold no NUL: once the types are checked, every
    field can be set."""
    if index is not None:
        where = where or f"Memory at index {index}: "
    try:
        return _draft(body, where, batch_item=index is not None)
    except DomainError as error:
        raise from_domain(error if index is None else at_index(index, error)) from None


def _draft(body: dict, where: str, *, batch_item: bool) -> memory_pb2.MemoryDraft:
    shaped = {k: body[k] for k in DRAFT_FIELDS if k in body and body[k] is not None}
    if body.get("metadata") is not None:
        shaped["metadata_json"] = json.dumps(body["metadata"])
    if batch_item:  # the proto's content cannot say "not sent"
        require_content(shaped.get("content"))
    for name in ("content", "type", "timestamp", "t_valid", "t_invalid", "updated_at", "last_accessed"):
        if name in shaped and not isinstance(shaped[name], str):
            raise ApiError(400, f"{where}'{name}' must be a string", "NOT_A_STRING")
    for name in ("importance", "confidence"):
        if shaped.get(name) is not None:
            unit_interval_number(shaped[name], name)
    values = {name: shaped.pop(name) for name in VALUE_FIELDS if name in shaped}
    draft = memory_pb2.MemoryDraft(**shaped)
    for name, value in values.items():
        set_json_value(getattr(draft, name), value)
    return draft


def set_json_value(target: struct_pb2.Value, value: Any) -> None:
    """A decoded JSON value into a google.protobuf.Value, as json_format.ParseDict
    would put it (a test holds them equal), at a fifth of the cost."""
    if value is None:
        target.null_value = struct_pb2.NULL_VALUE
    elif isinstance(value, str):
        target.string_value = value
    elif isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int | float):
        target.number_value = value
    elif isinstance(value, list):
        target.list_value.SetInParent()  # an empty list is still a list
        target.list_value.extend(value)
    else:
        target.struct_value.SetInParent()
        target.struct_value.update(value)


def iso(message, field: str) -> str | None:
    """A Timestamp field as ISO 8601 with +00:00, or None when unset."""
    return format_iso(ts_from_pb(message, field))


def float32_array(values) -> np.ndarray:
    """Stored float32 values, which the Json response prints in their
    shortest decimal form (0.1 stays 0.1, not 0.10000000149011612)."""
    return np.asarray(values, dtype=np.float32)


def memory_to_json(memory: memory_pb2.Memory, *, with_embedding: bool = True) -> dict:
    """Every stored field, named as the REST surface names them."""
    out: dict[str, Any] = {
        "id": memory.id,
        "content": memory.content,
        "type": memory.type,
        "confidence": memory.confidence,
        "importance": memory.importance,
        "tags": list(memory.tags),
        "tag_prefixes": list(memory.tag_prefixes),
        "metadata": json.loads(memory.metadata_json or "{}"),
        "factuality": json.loads(memory.factuality_json) if memory.factuality_json else None,
        "summary": memory.summary or None,
        "archived": memory.archived,
        "relevance_score": memory.relevance_score if memory.HasField("relevance_score") else None,
        "tenant": memory.tenant,
        "version": memory.version,
        "trust_state": memory.trust_state or "active",
    }
    if memory.review_rule:
        out["review_rule"] = memory.review_rule
    for name in TIME_FIELDS:
        out[name] = iso(memory, name)
    if with_embedding:
        out["embedding"] = float32_array(memory.embedding) if memory.embedding else None
    return out


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


#: Fields of an association the REST surface names; the rest are per-type properties.
ASSOCIATION_FIELDS = ("memory1_id", "memory2_id", "type", "strength")
#: Fields a PATCH may name (ingest decides which it accepts); archived and trust_state are a PATCH's alone.
UPDATE_FIELDS = (*DRAFT_FIELDS, "metadata", "archived", "trust_state")


def update_from_json(body: dict) -> tuple[memory_pb2.MemoryDraft, list[str]]:
    """A PATCH body: the draft, and the mask of fields it names (null included)."""
    mask = [("metadata_json" if k == "metadata" else k) for k in UPDATE_FIELDS if k in body]
    draft = draft_from_json(body)
    archived = body.get("archived")
    if archived is not None:
        try:
            draft.archived = validate_archived(archived)
        except DomainError as error:
            raise from_domain(error) from None
    trust_state = body.get("trust_state")
    if trust_state is not None:
        if not isinstance(trust_state, str):
            raise ApiError(400, "'trust_state' must be a string", "NOT_A_STRING")
        draft.trust_state = trust_state
    return draft, mask


def association_from_json(item: Any, where: str = "") -> ingest_service_pb2.Association:
    """An Association message from a JSON object. Values pass through as
    sent (a wrong type becomes a per-item failure in ingest, not a 400 for
    the whole batch); keys besides the four named ones are the properties."""
    item = require_object(item, f"{where}association".strip())

    def text(name: str) -> str:
        value = item.get(name)
        return "" if value is None else value if isinstance(value, str) else json.dumps(value)

    association = ingest_service_pb2.Association(
        memory1_id=text("memory1_id"),
        memory2_id=text("memory2_id"),
        type=text("type"),
        properties_json=json.dumps({k: v for k, v in item.items() if k not in ASSOCIATION_FIELDS}),
    )
    if item.get("strength") is not None:
        set_json_value(association.strength, item["strength"])
    return association


def association_to_json(association) -> dict:
    return {
        "memory1_id": association.memory1_id,
        "memory2_id": association.memory2_id,
        "relation_type": association.type,
        "strength": association.strength.number_value,
        "properties": json.loads(association.properties_json or "{}"),
    }


def relation_to_json(relation: memory_pb2.Relation) -> dict:
    """A relation as listed on a memory: the other end, type, direction, strength."""
    return {
        "memory_id": relation.memory_id,
        "type": relation.type,
        "direction": "outgoing" if relation.direction == memory_pb2.RELATION_DIRECTION_OUTGOING else "incoming",
        "strength": relation.strength,
        "properties": json.loads(relation.properties_json or "{}"),
        "created_at": iso(relation, "created_at"),
    }
