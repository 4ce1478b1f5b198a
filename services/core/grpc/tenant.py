"""The caller of the current call: its tenant, role, memory limit and actor,
taken from the claim the call carries (services/core/grpc/claims.py), which
ClaimInterceptor verified before the call reached its servicer. Nothing a
client writes in call metadata itself counts."""

from __future__ import annotations

from services.core.domain.errors import PermissionDenied, Unauthenticated
from services.core.grpc.claims import ADMIN_ROLE, Claim
from services.core.grpc.plane import count_refusal, current_claim, current_service


def _claim() -> Claim:
    claim = current_claim()
    if claim is None:  # only a servicer called outside a server could get here
        raise Unauthenticated("CLAIM_MISSING", "the call carries no verified claim")
    return claim


def tenant_if_any(context) -> str | None:
    """The tenant of the current call, or None for a call on no tenant's
    behalf, which the method table allows only where a method says so (the
    every-tenant status: services/core/grpc/method_roles.py)."""
    return _claim().tenant


def tenant_of(context) -> str:
    """The tenant of the current call; refused when the claim names none."""
    tenant = _claim().tenant
    if tenant is None:
        raise Unauthenticated("TENANT_REQUIRED", "the call's claim names no tenant")
    return tenant


def memory_limit_of(context) -> int | None:
    """The memory limit of the current call's tenant; None when unlimited.
    Signed into the claim, so a caller cannot lift it by leaving it out."""
    return _claim().memory_limit


def role_of(context) -> str:
    """The role the current call's claim carries."""
    return _claim().role


def actor_of(context) -> str:
    """Who made the current call: the token id the gateway signed in, or
    `system:<service>` for a service's own calls."""
    return _claim().actor or f"system:{current_service()}"


def is_operator(context) -> bool:
    """Whether the current call's claim is an operator's (may act across tenants)."""
    return _claim().operator


def require_operator(context, what: str = "an operation over every tenant") -> None:
    """Refuse (PERMISSION_DENIED) unless the current call's claim is an operator's.
    ClaimInterceptor checks it first, from the method table; this is the servicer's own word."""
    if not _claim().operator:
        count_refusal("NOT_OPERATOR")
        raise PermissionDenied("OPERATOR_REQUIRED", f"{what} needs the operator role")


def require_admin(context, what: str = "a tenant's administration") -> None:
    """Refuse (PERMISSION_DENIED) unless the current call's claim includes the admin role
    (a tenant's own admin, or an operator)."""
    if not _claim().allows(ADMIN_ROLE):
        count_refusal("NOT_ADMIN")
        raise PermissionDenied("ADMIN_REQUIRED", f"{what} needs the admin role")
