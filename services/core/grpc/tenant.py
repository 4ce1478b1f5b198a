"""The caller's tenant, and its memory limit, travel in call metadata, set by the gateway."""

from __future__ import annotations

from services.core.domain.errors import InvalidArgument, Unauthenticated

#: Metadata key carrying the tenant on every call.
TENANT_METADATA_KEY = "x-memgrid-tenant"
#: Metadata key carrying the tenant's memory limit (quotas); absent: unlimited.
MEMORY_LIMIT_METADATA_KEY = "x-memgrid-memory-limit"


def tenant_metadata(tenant: str) -> tuple[tuple[str, str], ...]:
    """Call metadata for a request made on behalf of `tenant`."""
    return ((TENANT_METADATA_KEY, tenant),)


def caller_metadata(tenant: str, memory_limit: int | None = None) -> tuple[tuple[str, str], ...]:
    """Call metadata for a request on behalf of `tenant`, with its memory limit when it has one."""
    if memory_limit is None:
        return tenant_metadata(tenant)
    return (*tenant_metadata(tenant), (MEMORY_LIMIT_METADATA_KEY, str(memory_limit)))


def _metadata_value(context, key: str) -> str | None:
    for name, value in context.invocation_metadata() or ():
        if name == key and value:
            return value
    return None


def tenant_if_any(context) -> str | None:
    """The tenant of the current call, or None for a call on no tenant's behalf."""
    return _metadata_value(context, TENANT_METADATA_KEY)


def tenant_of(context) -> str:
    """The tenant of the current call; refused when absent."""
    tenant = _metadata_value(context, TENANT_METADATA_KEY)
    if tenant is None:
        raise Unauthenticated("TENANT_REQUIRED", f"call metadata '{TENANT_METADATA_KEY}' is required")
    return tenant


def memory_limit_of(context) -> int | None:
    """The memory limit of the current call's tenant; None when unlimited."""
    text = _metadata_value(context, MEMORY_LIMIT_METADATA_KEY)
    if text is None:
        return None
    if not (text.isascii() and text.isdigit()):
        raise InvalidArgument(
            "MEMORY_LIMIT_INVALID", f"call metadata '{MEMORY_LIMIT_METADATA_KEY}' must be a whole number >= 0"
        )
    return int(text)
