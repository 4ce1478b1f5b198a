"""The enrich stages' figures, kept for the process and per tenant: a tenant's
GET /enrichment/status shows its own counts only (the process's count every
tenant's memories, an operator's to see)."""

from __future__ import annotations

from dataclasses import fields
from typing import Self

#: Tenants whose figures one process keeps at most; past it the oldest is forgotten (a count, not a record).
MAX_TENANTS = 10_000


class TenantCounts:
    """A mixin for a stats dataclass with a `tenants` dict field: `add`
    counts a change for the process and for the tenant at once."""

    tenants: dict[str, Self]
    # The failure figures every subclass carries (declared here for `failure`).
    failed: int
    by_reason: dict[str, int]

    def of(self, tenant: str) -> Self:
        """The tenant's own figures (zeros for a tenant not seen yet)."""
        found = self.tenants.get(tenant)
        if found is None:
            if len(self.tenants) >= MAX_TENANTS:
                self.tenants.pop(next(iter(self.tenants)))
            found = self.tenants[tenant] = type(self)()
        return found

    def add(self, tenant: str, **deltas: float) -> None:
        """Add each delta to the process's figure and to the tenant's."""
        for target in (self, self.of(tenant)):
            for name, delta in deltas.items():
                setattr(target, name, getattr(target, name) + delta)

    def set(self, tenant: str, **values: float) -> None:
        """Set each figure for the process and for the tenant."""
        for target in (self, self.of(tenant)):
            for name, value in values.items():
                setattr(target, name, value)

    def failure(self, tenant: str, count: int, reason: str) -> None:
        """A failure of `count` memories for `reason`, counted for both."""
        for target in (self, self.of(tenant)):
            target.failed += count
            target.by_reason[reason] = target.by_reason.get(reason, 0) + 1

    def figures(self) -> dict[str, object]:
        """The figures as a dict (the per-tenant ones left out)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "tenants"}  # type: ignore[arg-type]
