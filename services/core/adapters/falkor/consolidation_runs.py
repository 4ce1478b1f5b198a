"""Consolidation's bookkeeping on FalkorDB: run history and leases.

A run is a `ConsolidationRun` node per (run, tenant); a lease a `Lease` node
per (task, tenant) with its owner and expiry. Neither label is `Memory`, so
no memory read ever meets them. A lease is taken in one query (MERGE, then a
conditional SET): FalkorDB runs a graph's write queries one at a time, so of
two replicas racing for a free lease exactly one sees it free.
"""

from __future__ import annotations

import json
from typing import Any

from services.core.adapters.falkor.connection import FalkorConnection
from services.core.domain.consolidation import RunRecord
from services.core.domain.leases import LeaseInfo
from services.core.domain.times import from_micros, to_micros


def _run_row(record: RunRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "tenant": record.tenant,
        "task": record.task,
        "mode": record.mode,
        "dry_run": bool(record.dry_run),
        "trigger": record.trigger,
        "started_at": to_micros(record.started_at),
        "finished_at": to_micros(record.finished_at),
        # JSON text: FalkorDB refuses map properties.
        "counts": json.dumps({k: int(v) for k, v in record.counts.items()}, sort_keys=True),
        "errors": [str(e) for e in record.errors],
    }


def _run_record(props: dict[str, Any]) -> RunRecord:
    return RunRecord(
        id=props["id"],
        tenant=props["tenant"],
        task=props["task"],
        mode=props.get("mode") or props["task"],
        dry_run=bool(props.get("dry_run", False)),
        started_at=from_micros(props["started_at"]),
        finished_at=from_micros(props.get("finished_at")),
        counts={k: int(v) for k, v in json.loads(props.get("counts") or "{}").items()},
        errors=list(props.get("errors") or []),
        trigger=props.get("trigger") or "manual",
    )


def _lease(props: dict[str, Any]) -> LeaseInfo:
    return LeaseInfo(
        task=props["task"],
        tenant=props["tenant"],
        owner=props["owner"],
        acquired_at=from_micros(props["acquired_at"]),
        expires_at=from_micros(props["expires_at"]),
        progress=json.loads(props.get("progress") or "{}"),
    )


class FalkorRunStore:
    """The run ledger and the leases (ports/runs.py, leases.py) on FalkorDB."""

    def __init__(self, connection: FalkorConnection):
        self._conn = connection

    async def record_run(self, record: RunRecord, *, keep: int) -> None:
        """Store (or replace, by id) a run; the tenant's runs beyond the
        newest `keep` are removed in the same query."""
        await self._conn.query(
            """
            MERGE (r:ConsolidationRun {id: $row.id})
            SET r += $row
            WITH DISTINCT 1 AS one
            MATCH (o:ConsolidationRun {tenant: $tenant})
            WITH o ORDER BY o.started_at DESC, o.id DESC SKIP $keep
            DELETE o
            """,
            {"row": _run_row(record), "tenant": record.tenant, "keep": max(1, keep)},
        )

    async def run_history(self, tenant: str, limit: int, task: str | None = None) -> list[RunRecord]:
        """The tenant's runs (of one task, or all), newest start first."""
        only = " AND r.task = $task" if task else ""
        result = await self._conn.query(
            f"""
            MATCH (r:ConsolidationRun {{tenant: $tenant}}) WHERE true{only}
            RETURN properties(r) ORDER BY r.started_at DESC, r.id DESC LIMIT $limit
            """,
            {"tenant": tenant, "task": task, "limit": max(0, limit)},
        )
        return [_run_record(dict(row[0])) for row in result.result_set]

    async def last_runs(self, tenant: str) -> dict[str, RunRecord]:
        """The tenant's latest run of each task, failed ones included, dry runs left out."""
        result = await self._conn.query(
            """
            MATCH (r:ConsolidationRun {tenant: $tenant}) WHERE NOT coalesce(r.dry_run, false)
            WITH r ORDER BY r.started_at DESC, r.id DESC
            WITH r.task AS task, collect(properties(r))[0] AS last
            RETURN task, last
            """,
            {"tenant": tenant},
        )
        return {task: _run_record(dict(last)) for task, last in result.result_set}

    async def abandon_stale_runs(self, tenant: str, *, now_us: int, reason: str) -> list[str]:
        """Finish the tenant's unfinished real runs that nobody runs any more,
        in one query: a real run holds its (task, tenant) lease from before it
        is recorded until after it is finished, so an unfinished one whose
        lease is gone, lapsed, or was taken after it started (another run's)
        died mid-way. Its finish is when its own lease lapsed (else now), its
        counts the progress its lease last recorded, `reason` its last error.
        Dry runs take no lease and are left as they are. The ids marked."""
        result = await self._conn.query(
            """
            MATCH (r:ConsolidationRun {tenant: $tenant})
            WHERE r.finished_at IS NULL AND NOT coalesce(r.dry_run, false)
            OPTIONAL MATCH (l:Lease {tenant: $tenant}) WHERE l.task = r.task
            WITH r, l, l IS NOT NULL AND l.acquired_at <= r.started_at AS own
            WHERE l IS NULL OR l.expires_at <= $now OR NOT own
            SET r.finished_at = CASE WHEN own THEN l.expires_at ELSE $now END,
                r.counts = CASE WHEN own AND l.progress <> '{}' THEN l.progress ELSE r.counts END,
                r.errors = coalesce(r.errors, []) + [$reason]
            RETURN r.id
            """,
            {"tenant": tenant, "now": now_us, "reason": reason},
        )
        return [row[0] for row in result.result_set]

    async def acquire_lease(self, task: str, tenant: str, owner: str, *, now_us: int, ttl_us: int) -> bool:
        """Take the (task, tenant) lease when absent or expired, or extend it
        when `owner` holds it, in one query; whether `owner` holds it now."""
        result = await self._conn.query(
            """
            MERGE (l:Lease {task: $task, tenant: $tenant})
            ON CREATE SET l.owner = $owner, l.acquired_at = $now, l.expires_at = $now, l.progress = '{}'
            WITH l, l.owner = $owner AND l.expires_at > $now AS extend, l.expires_at <= $now AS lapsed
            WHERE extend OR lapsed
            SET l.acquired_at = CASE WHEN extend THEN l.acquired_at ELSE $now END,
                l.progress = CASE WHEN extend THEN l.progress ELSE '{}' END,
                l.owner = $owner,
                l.expires_at = $expires
            RETURN l.owner
            """,
            {"task": task, "tenant": tenant, "owner": owner, "now": now_us, "expires": now_us + max(1, ttl_us)},
        )
        return bool(result.result_set) and result.result_set[0][0] == owner

    async def renew_lease(
        self, task: str, tenant: str, owner: str, *, now_us: int, ttl_us: int, progress: dict[str, Any] | None = None
    ) -> bool:
        """Extend the lease `owner` still holds (an expired one nobody took
        counts), recording progress when given; False when it was taken over."""
        result = await self._conn.query(
            """
            MATCH (l:Lease {task: $task, tenant: $tenant}) WHERE l.owner = $owner
            SET l.expires_at = $expires, l.progress = coalesce($progress, l.progress)
            RETURN count(l)
            """,
            {
                "task": task,
                "tenant": tenant,
                "owner": owner,
                "expires": now_us + max(1, ttl_us),
                "progress": None if progress is None else json.dumps(progress, sort_keys=True, default=str),
            },
        )
        return bool(result.result_set and result.result_set[0][0])

    async def release_lease(self, task: str, tenant: str, owner: str) -> bool:
        """Drop the lease if `owner` holds it; whether it did."""
        result = await self._conn.query(
            "MATCH (l:Lease {task: $task, tenant: $tenant}) WHERE l.owner = $owner DELETE l RETURN count(l)",
            {"task": task, "tenant": tenant, "owner": owner},
        )
        return bool(result.result_set and result.result_set[0][0])

    async def leases(self, tenant: str, *, now_us: int) -> list[LeaseInfo]:
        """The tenant's unexpired leases, by task."""
        result = await self._conn.query(
            "MATCH (l:Lease {tenant: $tenant}) WHERE l.expires_at > $now RETURN properties(l) ORDER BY l.task",
            {"tenant": tenant, "now": now_us},
        )
        return [_lease(dict(row[0])) for row in result.result_set]
