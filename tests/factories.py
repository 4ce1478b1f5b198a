"""Records for tests that write straight into the graph."""

from __future__ import annotations

from datetime import datetime

from services.core.domain.model import Memory


def memory_at(
    memory_id: str,
    at: datetime,
    *,
    tenant: str = "default",
    content: str = "x",
    type: str = "Context",
    confidence: float = 0.5,
    importance: float = 0.5,
    **fields,
) -> Memory:
    """A memory whose every time is `at`; other fields (a time among them) by name."""
    values = dict(
        id=memory_id,
        tenant=tenant,
        content=content,
        type=type,
        confidence=confidence,
        importance=importance,
        timestamp=at,
        t_valid=at,
        updated_at=at,
        last_accessed=at,
        recorded_at=at,
    )
    values.update(fields)
    return Memory(**values)
