"""What every route needs: the caller, the service stubs, the JSON body."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from fastapi import Request

from gateway.auth import Caller
from gateway.envelope import ApiError
from gateway.tokens_file import ROLES
from services.core.grpc.tenant import caller_metadata


def _role_dependency(role: str) -> Callable[[Request], Caller]:
    def dependency(request: Request) -> Caller:
        return request.app.state.auth.authorize(request, role)

    dependency.__name__ = f"require_{role}"
    dependency.role = role  # read by the test that checks every route has one
    return dependency


_REQUIRE = {role: _role_dependency(role) for role in ROLES}


def require(role: str) -> Callable[[Request], Caller]:
    """A FastAPI dependency giving the caller, refused with 401 (no or an
    unknown token) or 403 (a role without `role`'s rights). Every route but
    /health takes one: `who: Caller = Depends(require("write"))`."""
    if role not in _REQUIRE:
        raise ValueError(f"unknown role {role!r}; one of {', '.join(ROLES)}")
    return _REQUIRE[role]


def clients(request: Request):
    return request.app.state.clients


def call_options(request: Request, who: Caller) -> dict:
    """Metadata (the tenant, its memory limit) and deadline for a call on the caller's behalf."""
    return {
        "metadata": caller_metadata(who.tenant, who.memory_limit),
        "timeout": request.app.state.settings.grpc_timeout_seconds,
    }


async def json_body(request: Request) -> object:
    raw = await request.body()
    if not raw:
        raise ApiError(400, "request body must be a JSON object", "INVALID_ARGUMENT")
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ApiError(400, f"malformed JSON: {exc}", "INVALID_ARGUMENT") from None


def elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


def query_list(request: Request, name: str) -> list[str]:
    """A repeatable query parameter; comma-separated values are split too."""
    return [part.strip() for value in request.query_params.getlist(name) for part in value.split(",") if part.strip()]


def query_text(request: Request, name: str) -> str:
    return (request.query_params.get(name) or "").strip()


def query_int(request: Request, name: str) -> int:
    """A count; anything but an integer is 0, which the services read as their default."""
    try:
        return int(query_text(request, name) or 0)
    except ValueError:
        return 0
