"""What both enrich stages do with a fetch of deliveries: the events they
want, grouped by tenant and handed over a tenant at a time; a tenant whose
work fails is retried (its deliveries only), the rest acknowledged."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Protocol

import structlog
from prometheus_client import Counter

from services.core.domain.delivery import Delivery, Outcome
from services.core.domain.model import MemoryEvent

log = structlog.get_logger()


class FailureCounts(Protocol):
    """The failure figures both stages' stats keep (for the process and per tenant)."""

    def failure(self, tenant: str, count: int, reason: str) -> None: ...


async def by_tenant(
    deliveries: list[Delivery],
    *,
    wanted: Callable[[MemoryEvent], bool],
    work: Callable[[str, list[str]], Awaitable[object]],
    stats: FailureCounts,
    outcomes_metric: Counter,
    what: str,
) -> list[Outcome]:
    """Run `work(tenant, ids)` for the wanted events; a failure is counted in
    `stats` (by exception type) and as `failed` in `outcomes_metric`."""
    ids: dict[str, set[str]] = defaultdict(set)
    for d in deliveries:
        if wanted(d.event):
            ids[d.event.tenant].add(d.event.memory_id)
    retry: set[tuple[str, str]] = set()
    for tenant, memory_ids in ids.items():
        try:
            await work(tenant, sorted(memory_ids))
        except Exception as exc:
            log.warning(f"{what} failed; will retry", tenant=tenant, count=len(memory_ids), error=str(exc))
            stats.failure(tenant, len(memory_ids), type(exc).__name__)
            outcomes_metric.labels("failed").inc(len(memory_ids))
            retry |= {(tenant, i) for i in memory_ids}
    outcomes = []
    for d in deliveries:
        if not wanted(d.event):
            outcomes.append(Outcome.SKIP)
        elif (d.event.tenant, d.event.memory_id) in retry:
            outcomes.append(Outcome.RETRY)
        else:
            outcomes.append(Outcome.DONE)
    return outcomes
