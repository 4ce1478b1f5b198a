"""What both enrich stages do with a fetch of deliveries: the events they
want, grouped by tenant and handed over a tenant at a time; a tenant whose
work fails is retried (its deliveries only), the rest acknowledged."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable

import structlog

from services.core.adapters.nats_consumer import Delivery, Outcome
from services.core.domain.model import MemoryEvent

log = structlog.get_logger()


async def by_tenant(
    deliveries: list[Delivery],
    *,
    wanted: Callable[[MemoryEvent], bool],
    work: Callable[[str, list[str]], Awaitable[object]],
    failed: Callable[[str, list[str], Exception], None],
    what: str,
) -> list[Outcome]:
    """Run `work(tenant, ids)` for the wanted events; `failed` is told of each failure."""
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
            failed(tenant, sorted(memory_ids), exc)
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
