"""The tombstone check a create's own query opens with (TombstoneGuard), as
Cypher: the create and supersede queries of writes.py put their write
behind it, so the check and the write are one query (docs/trust.md)."""

from __future__ import annotations

from typing import Any

from services.core.adapters.falkor.trust import TOMBSTONE_FIELDS, tombstone_from_row
from services.core.domain.tombstones import TombstoneGuard, TombstoneHeld

#: The tombstone check a create's own query opens with (TombstoneGuard): one
#: row, `guard_ok` false where a memory's first held hash is not the one its
#: event passed. The write follows in a CALL that runs only when it is true,
#: so the check and the write are one query, and FalkorDB runs a graph's
#: writes one at a time: no tombstone can be left between them. The query
#: answers with the tombstones found when it refused. A tenant without any
#: tombstone (one index look) has none of its hashes looked up (a 500-item
#: batch's check: FalkorDB's CPU 2.2 -> 0.5 ms). `guard_ran`: a memory of
#: this very query already there (it ran before its reply was lost) lets
#: the repeat through, to answer as the first run did (the body sees
#: `guard_ran` too: a create writes nothing then). A body that
#: aggregates before it writes must keep `guard_ok` among its keys: an
#: aggregate with no key makes a row even from none.
_GUARD_STONES = """
OPTIONAL MATCH (guard_any:Tombstone {tenant: $guard_tenant})
WITH guard_any LIMIT 1
UNWIND CASE WHEN guard_any IS NULL THEN [] ELSE $guard_hashes END AS guard_h
OPTIONAL MATCH (guard_t:Tombstone {content_hash: guard_h}) WHERE guard_t.tenant = $guard_tenant
WITH collect(guard_t) AS guard_stones
OPTIONAL MATCH (guard_ran:Memory {id: $guard_ran_id}) WHERE guard_ran.tenant = $guard_tenant
"""
#: Each memory's first held hash against the one it passed.
_GUARD_EACH = """
WITH guard_stones, guard_ran, guard_ran IS NOT NULL OR all(g IN $guard_rows WHERE
    coalesce(head([h IN g.hashes WHERE h IN [t IN guard_stones | t.content_hash]]), '') = g.passed) AS guard_ok
"""
#: The same rule where no memory passed a tombstone (every create not forced):
#: a write is refused by any tombstone among its hashes, so by any found at all
#: (a 500-item batch sends and checks no rows: FalkorDB's time 10 ms less).
_GUARD_NONE_PASSED = """
WITH guard_stones, guard_ran, guard_ran IS NOT NULL OR size(guard_stones) = 0 AS guard_ok
"""
_GUARD_CALL = """
CALL {
    WITH guard_ok, guard_ran
    WITH guard_ok, guard_ran WHERE guard_ok
"""
_GUARD_RETURN = f"""
    RETURN sum(n) AS n
}}
RETURN n, CASE WHEN guard_ok THEN [] ELSE [t IN guard_stones | [{TOMBSTONE_FIELDS}]] END
"""


def guarded(guard: TombstoneGuard, ran_id: str, body: str) -> tuple[str, dict[str, Any]]:
    """`body` behind the guard's check: the query and the guard's parameters."""
    params: dict[str, Any] = {
        "guard_tenant": guard.tenant,
        "guard_hashes": sorted({h for hashes in guard.hashes for h in hashes}),
        "guard_ran_id": ran_id,
    }
    if not any(guard.passed):
        return _GUARD_STONES + _GUARD_NONE_PASSED + _GUARD_CALL + body + _GUARD_RETURN, params
    params["guard_rows"] = [{"hashes": list(h), "passed": p} for h, p in zip(guard.hashes, guard.passed, strict=True)]
    return _GUARD_STONES + _GUARD_EACH + _GUARD_CALL + body + _GUARD_RETURN, params


def guarded_count(result) -> int:
    """The count a guarded query returned; TombstoneHeld when its guard refused the write."""
    n, stones = result.result_set[0]
    if stones:
        found = [tombstone_from_row(row) for row in stones]
        raise TombstoneHeld({t.content_hash: t for t in found})
    return int(n or 0)
