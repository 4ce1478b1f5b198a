"""POST /associate: which edges a client may author, and their properties."""

from __future__ import annotations

import math
from datetime import datetime

from services.core.domain.errors import InvalidArgument
from services.core.domain.ids import stored_memory_id, validate_memory_id
from services.core.domain.model import AUTHORABLE_RELATIONS, RELATION_PROPERTIES, SYSTEM_RELATIONS, Relation

#: Strength of an association when the request sends none.
DEFAULT_STRENGTH = 0.5
#: Type of an association when the request sends none (or an empty one), as in AutoMem.
DEFAULT_RELATION = "RELATES_TO"


def validate_relation_type(value: object, field: str = "type") -> str:
    """One of the authorable types, case-insensitive; system types refused."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument("RELATION_TYPE_REQUIRED", f"'{field}' is required", field=field)
    name = value.strip().upper()
    if name in SYSTEM_RELATIONS:
        raise InvalidArgument(
            "SYSTEM_RELATION", f"'{field}' {name} is created by the system and cannot be authored", field=field
        )
    if name not in AUTHORABLE_RELATIONS:
        raise InvalidArgument(
            "UNKNOWN_RELATION",
            f"'{field}' {value!r} is not a relation type; use one of {', '.join(AUTHORABLE_RELATIONS)}",
            field=field,
        )
    return name


def build_relation(
    memory1_id: object,
    memory2_id: object,
    relation_type: object,
    strength: object,
    properties: dict,
    *,
    now: datetime,
) -> Relation:
    """A validated edge memory1 -> memory2; type RELATES_TO and strength 0.5
    when not sent. Only the type's own properties are kept; each must be a
    string, number or boolean. An id that is no UUID names no memory:
    MEMORY_NOT_FOUND once the rest is checked, as AutoMem answers 404 for an
    unknown id after refusing a bad type or strength."""
    source = _endpoint(memory1_id, "memory1_id")
    target = _endpoint(memory2_id, "memory2_id")
    if source == target:
        raise InvalidArgument("SAME_MEMORY", "'memory2_id' must differ from 'memory1_id'", field="memory2_id")
    name = DEFAULT_RELATION if relation_type is None or relation_type == "" else validate_relation_type(relation_type)
    value = DEFAULT_STRENGTH if strength is None else strength
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not 0 <= value <= 1
    ):
        raise InvalidArgument(
            "OUT_OF_RANGE", f"'strength' must be a number between 0 and 1, got {strength!r}", field="strength"
        )
    kept = {}
    for key in RELATION_PROPERTIES[name]:
        if properties.get(key) is None:
            continue
        item = properties[key]
        if not isinstance(item, (str, int, float, bool)):
            raise InvalidArgument("INVALID_PROPERTY", f"'{key}' must be a string, number or boolean", field=key)
        kept[key] = item
    stored_memory_id(memory1_id, "memory1_id")
    stored_memory_id(memory2_id, "memory2_id")
    return Relation(source, target, name, float(value), now, kept)


def _endpoint(value: object, field: str) -> str:
    """A memory id, canonical when it is a UUID; other text as sent (it is
    refused as not found last); a missing one is INVALID_ID."""
    try:
        return validate_memory_id(value, field)
    except InvalidArgument:
        if not isinstance(value, str) or not value.strip():
            raise
        return value.strip()
