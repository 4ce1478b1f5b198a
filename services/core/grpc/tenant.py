"""The caller's tenant travels in call metadata, set by the gateway."""

from __future__ import annotations

from services.core.domain.errors import Unauthenticated

#: Metadata key carrying the tenant on every call.
TENANT_METADATA_KEY = "x-memgrid-tenant"


def tenant_metadata(tenant: str) -> tuple[tuple[str, str], ...]:
    """Call metadata for a request made on behalf of `tenant`."""
    return ((TENANT_METADATA_KEY, tenant),)


def tenant_of(context) -> str:
    """The tenant of the current call; refused when absent."""
    for key, value in context.invocation_metadata() or ():
        if key == TENANT_METADATA_KEY and value:
            return value
    raise Unauthenticated("TENANT_REQUIRED", f"call metadata '{TENANT_METADATA_KEY}' is required")
