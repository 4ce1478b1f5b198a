"""The consolidation run ledger: each run's record, per tenant, kept in the graph."""

from __future__ import annotations

from typing import Protocol

from services.core.domain.consolidation import RunRecord
from services.core.ports.leases import LeaseListing, TaskLeases


class TenantDirectory(Protocol):
    """The tenants a pass over every tenant visits."""

    async def tenants(self) -> list[str]:
        """The tenants that hold at least one memory, sorted."""


class LastRuns(Protocol):
    """Each task's latest run: when it is due again."""

    async def last_runs(self, tenant: str) -> dict[str, RunRecord]:
        """The tenant's latest run of each task (dry runs left out), by task."""


class RunLedger(LastRuns, Protocol):
    """The runner's records of its runs."""

    async def record_run(self, record: RunRecord, *, keep: int) -> None:
        """Store (or replace, by id) a run's record; the tenant's oldest beyond `keep` go."""

    async def abandon_stale_runs(self, tenant: str, *, now_us: int, reason: str) -> list[str]:
        """Finish the tenant's unfinished real runs whose lease is gone, lapsed
        or another run's (their process died mid-way), with `reason` as an
        error; the run ids so marked."""


class RunStore(TaskLeases, RunLedger, Protocol):
    """What the runner holds: the lease of the run it makes and the ledger it records it in."""


class RunSchedule(TenantDirectory, LastRuns, Protocol):
    """What the schedule's tick reads: every tenant's latest runs, to find the tasks due."""


class RunStatus(TenantDirectory, LeaseListing, Protocol):
    """What the status and history reads show: the runs recorded and the leases held."""

    async def run_history(self, tenant: str, limit: int, task: str | None = None) -> list[RunRecord]:
        """The tenant's runs (of one task, or all), newest start first."""
