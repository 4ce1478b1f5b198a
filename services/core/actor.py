"""Who a write is done for, as the audit log records it: the call's actor
(`token:<id>`, set from call metadata by the gRPC interceptor) or, for
background work, `system:<service>`. A context variable, so the stores read
it where they build a write's entry without every use case passing it on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token

_ACTOR: ContextVar[str] = ContextVar("memgrid_actor", default="system")


def current_actor() -> str:
    """The actor of the running call or background task."""
    return _ACTOR.get()


def system_actor(service: str) -> str:
    """The actor of a service's own background work."""
    return f"system:{service}"


def set_actor(actor: str) -> Token[str]:
    """From now on in this context (and the tasks it starts), writes are
    recorded as `actor`'s; reset_actor(token) undoes it."""
    return _ACTOR.set(actor)


def reset_actor(token: Token[str]) -> None:
    _ACTOR.reset(token)


@contextmanager
def acting_as(actor: str) -> Iterator[None]:
    """Within the block (and the tasks it starts), writes are recorded as `actor`'s."""
    token = _ACTOR.set(actor)
    try:
        yield
    finally:
        _ACTOR.reset(token)
