"""Moving one shared graph into the bucket layout, a tenant at a time
(services/core/graph_migration.py drives it; docs/scaling.md, Migration).

A tenant is copied whole: every node holding its `tenant` (outbox events,
idempotency keys and leases too: the relay must still publish what was
pending), with every property as stored, then every edge between two of its
nodes. A tenant whose copy was cut short is cleared from its bucket and
copied again, so a copy is all or nothing per tenant and can be resumed.
The source graph is only read; it is left in place.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from services.core.adapters.falkor.connection import FalkorConnection


@dataclass
class TenantCounts:
    """A tenant's nodes by label and edges by type, in one graph."""

    nodes: dict[str, int] = field(default_factory=dict)
    edges: dict[str, int] = field(default_factory=dict)


class GraphCopy:
    """Copies tenants from `source` (a shared graph) into `target` (a bucket layout)."""

    def __init__(self, source: FalkorConnection, target: FalkorConnection, *, page_size: int = 500):
        self._source = source
        self._target = target
        self._page = page_size

    async def tenants(self) -> list[str]:
        """The tenants holding any node in the source, sorted."""
        rows = await self._source.visit("MATCH (n) WHERE n.tenant IS NOT NULL RETURN DISTINCT n.tenant")
        return sorted({row[0] for row in rows})

    async def counts(self, conn: FalkorConnection, tenant: str) -> TenantCounts:
        """The tenant's nodes by label and edges by type, where `conn` routes the tenant."""
        nodes = await conn.query("MATCH (n) WHERE n.tenant = $tenant RETURN labels(n)[0], count(n)", {"tenant": tenant})
        edges = await conn.query(
            "MATCH (a)-[e]->(b) WHERE a.tenant = $tenant AND b.tenant = $tenant RETURN type(e), count(e)",
            {"tenant": tenant},
        )
        return TenantCounts(
            {label: int(n) for label, n in nodes.result_set}, {kind: int(n) for kind, n in edges.result_set}
        )

    async def clear(self, tenant: str) -> int:
        """Remove whatever an earlier, cut-short copy left of the tenant in its bucket; how many nodes."""
        result = await self._target.query(
            "MATCH (n) WHERE n.tenant = $tenant DETACH DELETE n RETURN count(n)", {"tenant": tenant}, idempotent=True
        )
        return int(result.result_set[0][0]) if result.result_set else 0

    async def copy(self, tenant: str) -> tuple[int, int]:
        """Copy the tenant's nodes, then its edges; (nodes, edges) written."""
        top = await self._source.query("MATCH (n) RETURN max(id(n))", {"tenant": tenant})
        last = top.result_set[0][0] if top.result_set and top.result_set[0][0] is not None else -1
        made: dict[int, int] = {}  # source node id -> the copy's id in the tenant's bucket
        for start in range(0, last + 1, self._page):
            result = await self._source.query(
                "MATCH (n) WHERE id(n) >= $start AND id(n) < $stop AND n.tenant = $tenant"
                " RETURN id(n), labels(n), properties(n) ORDER BY id(n)",
                {"start": start, "stop": start + self._page, "tenant": tenant},
            )
            groups: dict[tuple[str, ...], list[tuple[int, dict[str, Any]]]] = defaultdict(list)
            for ref, labels, props in result.result_set:
                groups[tuple(labels)].append((int(ref), dict(props)))
            for labels, members in groups.items():
                addresses = await self._create(tenant, labels, [props for _, props in members])
                made.update((ref, address) for (ref, _), address in zip(members, addresses, strict=True))
        edges = 0
        for start in range(0, last + 1, self._page):
            result = await self._source.query(
                "MATCH (a)-[e]->(b) WHERE id(a) >= $start AND id(a) < $stop AND a.tenant = $tenant"
                " AND b.tenant = $tenant RETURN id(a), type(e), id(b), properties(e)",
                {"start": start, "stop": start + self._page, "tenant": tenant},
            )
            kinds: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for a, kind, b, props in result.result_set:
                kinds[kind].append({"a": made[int(a)], "b": made[int(b)], "p": dict(props)})
            for kind, rows in kinds.items():
                edges += await self._link(tenant, kind, rows)
        return len(made), edges

    async def _create(self, tenant: str, labels: tuple[str, ...], rows: list[dict[str, Any]]) -> list[int]:
        label = ":".join(f"`{x.replace('`', '')}`" for x in labels)
        result = await self._target.query(
            f"UNWIND range(0, size($rows) - 1) AS i CREATE (n:{label}) SET n = $rows[i] RETURN i, id(n) ORDER BY i",
            {"rows": rows, "tenant": tenant},
        )
        return [int(ref) for _, ref in result.result_set]

    async def _link(self, tenant: str, kind: str, rows: list[dict[str, Any]]) -> int:
        result = await self._target.query(
            f"""
            UNWIND $rows AS r
            WITH r, r.a AS source, r.b AS target
            MATCH (a) WHERE id(a) = source
            MATCH (b) WHERE id(b) = target
            CREATE (a)-[e:`{kind.replace("`", "")}`]->(b) SET e = r.p
            RETURN count(e)
            """,
            {"rows": rows, "tenant": tenant},
        )
        return int(result.result_set[0][0]) if result.result_set else 0
