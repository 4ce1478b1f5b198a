"""Retries with exponential backoff while a dependency comes up."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog
from tenacity import AsyncRetrying, retry_if_exception, stop_after_delay, wait_exponential_jitter

T = TypeVar("T")
log = structlog.get_logger()


async def with_backoff(
    what: str,
    attempt: Callable[[], Awaitable[T]],
    *,
    retryable: Callable[[BaseException], bool],
    deadline_seconds: float,
    initial_seconds: float,
    max_seconds: float,
) -> T:
    """Run `attempt` until it succeeds, a non-retryable error occurs, or the
    deadline passes (the last error is then raised). The first try goes
    straight through: tenacity's machinery (30 µs a call on the development
    machine, paid by every FalkorDB query) is built only once a try failed."""
    try:
        return await attempt()
    except Exception as exc:
        if not retryable(exc):
            raise
        log.warning("dependency not ready, retrying", dependency=what, attempt=1, error=str(exc))

    def _log(state) -> None:
        log.warning(
            "dependency not ready, retrying",
            dependency=what,
            attempt=state.attempt_number,
            error=str(state.outcome.exception()),
        )

    async for trying in AsyncRetrying(
        retry=retry_if_exception(retryable),
        wait=wait_exponential_jitter(multiplier=initial_seconds, max=max_seconds, jitter=initial_seconds),
        stop=stop_after_delay(deadline_seconds),
        before_sleep=_log,
        reraise=True,
    ):
        with trying:
            return await attempt()
    raise AssertionError("unreachable")
