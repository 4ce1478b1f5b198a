"""Memory ids are server-minted UUIDs; anything else is malformed."""

from __future__ import annotations

import uuid

from services.core.domain.errors import InvalidArgument, NotFound


def validate_memory_id(value: object, field: str = "id") -> str:
    """The canonical (lowercase, hyphenated) form of a UUID, or INVALID_ID."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument("INVALID_ID", f"'{field}' is required", field=field)
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        raise InvalidArgument("INVALID_ID", f"'{field}' is not a valid memory id: {value!r}", field=field) from None


def stored_memory_id(value: object, field: str = "id") -> str:
    """validate_memory_id for a memory an update or delete must find: text
    that is no memory id names no stored memory, so it is MEMORY_NOT_FOUND
    (AutoMem's PATCH and DELETE answer any unknown id with 404); a missing
    id is still INVALID_ID."""
    try:
        return validate_memory_id(value, field)
    except InvalidArgument:
        if not isinstance(value, str) or not value.strip():
            raise
        shown = value[:100]  # a path parameter of any length: the message names its start
        raise NotFound("MEMORY_NOT_FOUND", f"memory {shown!r} not found", field=field, id=shown) from None
