"""The audit log in the graph (AuditReader, AuditSealing): entries written by each write's own
query, the sealer's reads and writes, history, listings and verification.

Every write query that records Outbox rows (one per event, each carrying the
entry's content in `audit`) ends with `tail()`: it takes the tenant's
AuditCounter forward by the number of rows and creates one AuditEntry per row
with the next sequence numbers. FalkorDB runs a graph's writes one at a time,
so the sequence is gapless and in commit order; and the entry commits with
the change, so an acknowledged write always has its entry. Cypher cannot
hash: the chain is sealed afterwards (services/consolidate/audit_sealer.py).
"""

from __future__ import annotations

from services.core.adapters.falkor.connection import FalkorConnection
from services.core.domain.audit import AuditEntry, Seal

_FIELDS = "a.tenant, a.seq, a.at, a.event_id, a.record, a.content_hash, a.chain"
#: `akey` is "<tenant>/<seq, zero-padded>": one indexed string orders a
#: tenant's entries, so a window of its log is one index range (FalkorDB
#: indexes single properties: seq alone would range over every tenant's).
_SEQ_DIGITS = 15
_ZEROS = "0" * _SEQ_DIGITS
#: The widest window of sequence numbers one listing query ranges over.
_MAX_WINDOW = 65_536
#: How far an entry's time may trail a later-numbered one's (a write reads the clock before it
#: commits): a time bound is sought this much wider, the filter itself stays exact.
_TIME_SLACK_US = 300 * 1_000_000


def audit_key(tenant: str, seq: int) -> str:
    return f"{tenant}/{seq:0{_SEQ_DIGITS}d}"


def _entry(row) -> AuditEntry:
    tenant, seq, at, event_id, record, content, chain = row
    return AuditEntry(tenant, int(seq), int(at or 0), event_id or "", record or "", content or "", chain or "")


class AuditTail:
    """The Cypher a write query appends after `CREATE (x:Outbox) ...` (one
    row per outbox node `x`, by default). `carry` maps the names the query returns to
    their aggregate (e.g. {"ids": "collect(it.id)"}); after the tail, one row
    per tenant holds them. Off (AUDIT_LOG_ENABLED=false), it only groups."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled

    def __call__(self, carry: dict[str, str], *, row: str = "x", tenant: str = "x.tenant") -> str:
        """`row`: the outbox node (or row map) per row, null where the query
        recorded none; `tenant`: the row's tenant."""
        exprs = ", ".join(f"{expr} AS {name}" for name, expr in carry.items())
        names = ", ".join(carry)
        if not self.enabled:
            return f" WITH {tenant} AS audit_tenant, {exprs} WITH {names} "
        return f" WITH {tenant} AS audit_tenant, collect({row}) AS audit_xs, {exprs}" + self._entries(names)

    def listed(self, carry: dict[str, str], *, entries: str, tenant: str) -> str:
        """The tail of a query whose row holds one tenant's entries as a list
        (`entries`: outbox rows, in the order they are numbered), with
        nothing to group: `carry` maps names to plain expressions."""
        exprs = ", ".join(f"{expr} AS {name}" for name, expr in carry.items())
        names = ", ".join(carry)
        if not self.enabled:
            return f" WITH {exprs} "
        return f" WITH {tenant} AS audit_tenant, {entries} AS audit_xs, {exprs}" + self._entries(names)

    @staticmethod
    def _entries(names: str) -> str:
        """From a row holding audit_tenant, its entries' list audit_xs and `names`:
        the counter taken forward and one AuditEntry per list item."""
        return f"""
            MERGE (audit_c:AuditCounter {{tenant: audit_tenant}})
            WITH audit_c, audit_tenant, audit_xs, coalesce(audit_c.seq, 0) AS audit_base, {names}
            SET audit_c.seq = audit_base + size(audit_xs)
            FOREACH (audit_i IN range(0, size(audit_xs) - 1) |
                CREATE (:AuditEntry {{
                    tenant: audit_tenant, seq: audit_base + audit_i + 1, at: (audit_xs[audit_i]).created_at,
                    akey: audit_tenant + '/' + right('{_ZEROS}' + toString(audit_base + audit_i + 1), {_SEQ_DIGITS}),
                    event_id: (audit_xs[audit_i]).id, record: (audit_xs[audit_i]).audit,
                    memory_id: (audit_xs[audit_i]).memory_id, kind: (audit_xs[audit_i]).kind
                }}))
            WITH {names}
        """


class FalkorAuditLog:
    """AuditReader and AuditSealing on FalkorDB: reads for history, listings
    and verify; the sealer's reads and writes."""

    def __init__(self, connection: FalkorConnection):
        self._conn = connection

    async def history(self, tenant: str, memory_id: str, limit: int) -> list[AuditEntry]:
        """One memory's entries, oldest first."""
        result = await self._conn.query(
            f"MATCH (a:AuditEntry {{memory_id: $id}}) WHERE a.tenant = $tenant"
            f" RETURN {_FIELDS} ORDER BY a.seq LIMIT $limit",
            {"tenant": tenant, "id": memory_id, "limit": limit},
        )
        return [_entry(row) for row in result.result_set]

    async def list_entries(
        self,
        tenant: str,
        *,
        after_seq: int,
        limit: int,
        since_us: int | None = None,
        until_us: int | None = None,
        kind: str = "",
        memory_id: str = "",
        within: int | None = None,
    ) -> list[AuditEntry]:
        """The tenant's entries after `after_seq` in sequence order, filtered;
        with `within`, only those numbered up to after_seq + within (a
        bounded index range: the sealer and verify read a gapless log so).

        FalkorDB reads an index range whole before it sorts and cuts it (a
        first page of 100 took 315 ms at 200k entries), so a listing never
        ranges over the rest of the log: one memory's entries come from its
        own index; other listings read windows of sequence numbers, widening,
        until the page is full, starting where `since` begins (sought by
        halving, the log's times rising with its numbers) and stopping once
        a window ends past `until`."""
        filters = (since_us, until_us, kind)
        if within is not None:
            return await self._window(tenant, after_seq, after_seq + within, limit, *filters)
        if memory_id:
            return await self._of_memory(tenant, memory_id, after_seq, limit, *filters)
        last = await self.last_seq(tenant)
        lo = after_seq
        if since_us is not None:
            lo = await self._older_than(tenant, since_us - _TIME_SLACK_US, lo, last)
        found: list[AuditEntry] = []
        width = max(limit, 1)
        while lo < last and len(found) < limit:
            hi = min(last, lo + width)
            found += await self._window(tenant, lo, hi, limit - len(found), *filters)
            at = await self._at(tenant, hi) if until_us is not None else None
            if at is not None and until_us is not None and at >= until_us + _TIME_SLACK_US:
                break  # every later entry is later still
            lo, width = hi, min(width * 2, _MAX_WINDOW)
        return found

    @staticmethod
    def _filters(where: list[str], params: dict, since_us: int | None, until_us: int | None, kind: str) -> None:
        if since_us is not None:
            where.append("a.at >= $since")
            params["since"] = since_us
        if until_us is not None:
            where.append("a.at < $until")
            params["until"] = until_us
        if kind:
            where.append("a.kind = $kind")
            params["kind"] = kind

    async def _window(
        self, tenant: str, after_seq: int, last: int, limit: int, since_us: int | None, until_us: int | None, kind: str
    ) -> list[AuditEntry]:
        """Filtered entries numbered in (after_seq, last], in order: one index range.

        The numbers are tested as well as the keys: FalkorDB's index range
        on a string can hand back keys past its upper bound (seen: keys up to
        .../29 for a bound of .../22), and no later step filters them out."""
        last = min(last, 10**_SEQ_DIGITS - 1)
        where = ["a.akey > $lo", "a.akey <= $hi", "a.tenant = $tenant", "a.seq > $after", "a.seq <= $last"]
        params: dict = {
            "tenant": tenant,
            "lo": audit_key(tenant, after_seq),
            "hi": audit_key(tenant, last),
            "after": after_seq,
            "last": last,
            "limit": limit,
        }
        self._filters(where, params, since_us, until_us, kind)
        result = await self._conn.query(
            f"MATCH (a:AuditEntry) WHERE {' AND '.join(where)} RETURN {_FIELDS} ORDER BY a.akey LIMIT $limit", params
        )
        return [_entry(row) for row in result.result_set]

    async def _of_memory(
        self,
        tenant: str,
        memory_id: str,
        after_seq: int,
        limit: int,
        since_us: int | None,
        until_us: int | None,
        kind: str,
    ) -> list[AuditEntry]:
        """Filtered entries of one memory numbered after after_seq, in order (its own index)."""
        where = ["a.tenant = $tenant", "a.seq > $after"]
        params: dict = {"tenant": tenant, "id": memory_id, "after": after_seq, "limit": limit}
        self._filters(where, params, since_us, until_us, kind)
        result = await self._conn.query(
            f"MATCH (a:AuditEntry {{memory_id: $id}}) WHERE {' AND '.join(where)}"
            f" RETURN {_FIELDS} ORDER BY a.seq LIMIT $limit",
            params,
        )
        return [_entry(row) for row in result.result_set]

    async def _at(self, tenant: str, seq: int) -> int | None:
        """The time of entry `seq` (None: no such entry)."""
        result = await self._conn.query(
            "MATCH (a:AuditEntry {akey: $key}) RETURN a.at", {"key": audit_key(tenant, seq)}, tenant=tenant
        )
        return int(result.result_set[0][0]) if result.result_set and result.result_set[0][0] is not None else None

    async def _older_than(self, tenant: str, bound_us: int, lo: int, hi: int) -> int:
        """The last sequence in [lo, hi] whose entry is older than `bound_us`
        (by halving; lo when there is none, or where an entry is missing)."""
        start = lo
        while lo < hi:
            mid = (lo + hi + 1) // 2
            at = await self._at(tenant, mid)
            if at is None:
                return start  # a gap: no guess, the scan starts where it was asked to
            if at < bound_us:
                lo = mid
            else:
                hi = mid - 1
        return lo

    async def last_seq(self, tenant: str) -> int:
        """The tenant's counter: the sequence of its latest entry (0: none)."""
        result = await self._conn.query("MATCH (c:AuditCounter {tenant: $tenant}) RETURN c.seq", {"tenant": tenant})
        return int(result.result_set[0][0] or 0) if result.result_set else 0

    async def unsealed_heads(self, limit: int) -> list[tuple[str, int, str]]:
        """(tenant, last sealed seq, its chain hash) of tenants with entries to seal (of every graph)."""
        rows = await self._conn.visit(
            """
            MATCH (c:AuditCounter) WHERE coalesce(c.sealed_seq, 0) < c.seq
            RETURN c.tenant, coalesce(c.sealed_seq, 0), c.sealed_chain LIMIT $limit
            """,
            {"limit": limit},
        )
        return [(tenant, int(seq), chain or "") for tenant, seq, chain in rows[:limit]]

    async def seal(self, tenant: str, seals: list[Seal], *, expected_sealed_seq: int) -> bool:
        """Write the hashes and move the tenant's sealed head, only if the head
        is still `expected_sealed_seq` (another sealer did not get there first)."""
        if not seals:
            return False
        result = await self._conn.query(
            """
            MATCH (c:AuditCounter {tenant: $tenant}) WHERE coalesce(c.sealed_seq, 0) = $expected
            SET c.sealed_seq = $last_seq, c.sealed_chain = $last_chain
            WITH c
            UNWIND $seals AS s
            MATCH (a:AuditEntry {akey: s.key})
            SET a.content_hash = s.content, a.chain = s.chain
            RETURN count(a)
            """,
            {
                "tenant": tenant,
                "expected": expected_sealed_seq,
                "last_seq": seals[-1].seq,
                "last_chain": seals[-1].chain_hash,
                "seals": [
                    {"key": audit_key(tenant, s.seq), "content": s.content_hash, "chain": s.chain_hash} for s in seals
                ],
            },
        )
        return bool(result.result_set and result.result_set[0][0])
