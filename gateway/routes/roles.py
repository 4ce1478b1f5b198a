"""The role a route needs, as a FastAPI dependency that gives the caller."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import Request

from gateway.auth import Caller, role_allows
from gateway.envelope import ApiError
from gateway.tokens_file import ROLES


def _role_dependency(role: str) -> Callable[[Request], Awaitable[Caller]]:
    # async, though it never awaits: FastAPI runs a plain def dependency in a
    # worker thread, a hand-off that cost more than the check itself.
    async def dependency(request: Request) -> Caller:
        return request.app.state.auth.authorize(request, role)

    dependency.__name__ = f"require_{role}"
    vars(dependency)["role"] = role  # a function attribute (untyped), read by the test that checks every route has one
    return dependency


_REQUIRE = {role: _role_dependency(role) for role in ROLES}


def require(role: str) -> Callable[[Request], Awaitable[Caller]]:
    """A FastAPI dependency giving the caller, refused with 401 (no or an
    unknown token) or 403 (a role without `role`'s rights). Every route but
    /health takes one: `who: Caller = Depends(require("write"))`."""
    if role not in _REQUIRE:
        raise ValueError(f"unknown role {role!r}; one of {', '.join(ROLES)}")
    return _REQUIRE[role]


def escalate(request: Request, who: Caller, needed: str, field: str) -> Caller:
    """`who`, when its role includes `needed`; the single token raised by
    X-Admin-Token when it comes with one; else 403 naming `field`, the part of
    the request that needs the role (every_tenant needs `operator`, force `review`)."""
    if role_allows(who.role, needed):
        return who
    try:
        return request.app.state.auth.authorize(request, needed)
    except ApiError as exc:
        if exc.code != 403:
            raise
        raise ApiError(
            403,
            f"'{field}' needs the '{needed}' role; this token's role is '{who.role}'",
            "PERMISSION_DENIED",
        ) from None


def every_tenant_flag(request: Request, who: Caller, body: dict) -> tuple[Caller, bool]:
    """A body's `every_tenant` (false when absent; 400 when not a boolean) and
    the caller raised to operator when it is true (403 naming it for anyone else)."""
    every_tenant = False if body.get("every_tenant") is None else body["every_tenant"]
    if not isinstance(every_tenant, bool):
        raise ApiError(400, "'every_tenant' must be true or false", "NOT_A_BOOLEAN")
    if every_tenant:
        who = escalate(request, who, "operator", "every_tenant")  # 403 for a tenant's admin
    return who, every_tenant
