"""Memory ids are server-minted UUIDs; anything else is malformed."""

from __future__ import annotations

import uuid

from services.core.domain.errors import InvalidArgument


def validate_memory_id(value: object, field: str = "id") -> str:
    """The canonical (lowercase, hyphenated) form of a UUID, or INVALID_ID."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument("INVALID_ID", f"'{field}' is required", field=field)
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        raise InvalidArgument("INVALID_ID", f"'{field}' is not a valid memory id: {value!r}", field=field) from None
