"""The one retry loop of ingest's compare-and-set writes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from services.core.domain.errors import Aborted

T = TypeVar("T")


async def compare_and_set(
    attempt: Callable[[], Awaitable[T | None]], *, retries: int, gave_up: Callable[[], Aborted]
) -> T:
    """Run `attempt` until it answers something other than None: once, then
    up to `retries` more times (WRITE_CONFLICT_RETRIES), each after it met a
    concurrent change (None). Still None after that, `gave_up()` is raised:
    CONCURRENT_UPDATE, a 409 the client may retry. An error the attempt
    raises ends the loop at once."""
    for _ in range(1 + max(0, retries)):
        done = await attempt()
        if done is not None:
            return done
    raise gave_up()
