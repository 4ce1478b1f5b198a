"""The graph views and the analysis (GraphViews), and a tenant's memory ids page by page (GraphExport).
A backup's export is services/core/adapters/falkor/backups.py."""

from __future__ import annotations

import asyncio

from services.core.adapters.falkor.connection import FalkorConnection
from services.core.adapters.falkor.rows import RETURN_FIELDS, edge_relation, read_row
from services.core.domain.analysis import AnalysisFigures, TypeFigures
from services.core.domain.graph_views import GraphStats, PatternNode
from services.core.domain.model import Memory, Relation
from services.core.domain.state import PRECEDENCE, State
from services.core.domain.times import from_micros

#: Each state's condition on a memory m at $now (`replaced`: a current
#: successor was found), asked in the domain's order (state.PRECEDENCE).
_STATE_CONDITIONS = {
    State.SUPERSEDED: "replaced",
    State.ARCHIVED: "coalesce(m.archived, false)",
    State.NOT_YET_VALID: "m.t_valid IS NOT NULL AND m.t_valid > $now",
    State.EXPIRED: "m.t_invalid IS NOT NULL AND m.t_invalid <= $now",
}
_STATE_CASE = " ".join(f"WHEN {_STATE_CONDITIONS[state]} THEN '{state.value}'" for state in PRECEDENCE)
#: One pass over a tenant's memories for the figures of GET /analyze: totals,
#: averages, span, states (one each, in the current-state pass's order) and
#: the confidence and importance buckets. As in the pass
#: (services/core/domain/state.py), a memory is superseded only when a chain
#: of supersession edges (existing at $now, at most {hops} long) leads from it
#: to another memory that is current itself; the chain is looked for only
#: where superseded_at is set.
_ANALYSIS_SUMMARY = (
    """
MATCH (m:Memory) WHERE m.tenant = $tenant
WITH m, CASE
    WHEN m.superseded_at IS NULL OR m.superseded_at > $now THEN false
    ELSE size([p = (m)-[:INVALIDATED_BY|EVOLVED_INTO*1..{hops}]->(h:Memory)
               WHERE h <> m AND h.tenant = $tenant AND NOT coalesce(h.archived, false)
                 AND (h.t_valid IS NULL OR h.t_valid <= $now) AND (h.t_invalid IS NULL OR h.t_invalid > $now)
                 AND all(r IN relationships(p) WHERE r.created_at IS NULL OR r.created_at <= $now) | h.id]) > 0
    END AS replaced
WITH m, CASE """
    + _STATE_CASE
    + """ ELSE 'current' END AS state
RETURN count(m), avg(m.importance), avg(m.confidence), min(m.timestamp), max(m.timestamp),
       sum(CASE WHEN state = 'archived' THEN 1 ELSE 0 END),
       sum(CASE WHEN state = 'expired' THEN 1 ELSE 0 END),
       sum(CASE WHEN state = 'not_yet_valid' THEN 1 ELSE 0 END),
       sum(CASE WHEN state = 'superseded' THEN 1 ELSE 0 END),
       sum(CASE WHEN state = 'current' THEN 1 ELSE 0 END),
       sum(CASE WHEN m.confidence < 0.4 THEN 1 ELSE 0 END),
       sum(CASE WHEN m.confidence >= 0.4 AND m.confidence < 0.7 THEN 1 ELSE 0 END),
       sum(CASE WHEN m.confidence >= 0.7 THEN 1 ELSE 0 END),
       sum(CASE WHEN m.importance < 0.5 THEN 1 ELSE 0 END),
       sum(CASE WHEN m.importance >= 0.5 AND m.importance < 0.8 THEN 1 ELSE 0 END),
       sum(CASE WHEN m.importance >= 0.8 THEN 1 ELSE 0 END)
"""
)


class FalkorGraphViews:
    """GraphViews on FalkorDB."""

    def __init__(self, connection: FalkorConnection):
        self._conn = connection

    async def graph_stats(self, tenant: str) -> GraphStats:
        """Memories by type and memory-to-memory edges by type, for one tenant."""
        memories, edges = await asyncio.gather(
            self._conn.query(
                "MATCH (m:Memory) WHERE m.tenant = $tenant RETURN coalesce(m.type, ''), count(m)", {"tenant": tenant}
            ),
            self._conn.query(
                """
                MATCH (a:Memory)-[e]->(b:Memory) WHERE a.tenant = $tenant AND b.tenant = $tenant
                RETURN type(e), count(e)
                """,
                {"tenant": tenant},
            ),
        )
        by_type = {kind: int(n) for kind, n in memories.result_set}
        by_relation = {kind: int(n) for kind, n in edges.result_set}
        return GraphStats(sum(by_type.values()), sum(by_relation.values()), by_type, by_relation)

    async def frontier(self, tenant: str, ids: list[str], exclude: list[str], limit: int) -> list[tuple[Memory, float]]:
        """Memories one edge (either way) from any of `ids`, not in `exclude`,
        with the strongest such edge: strongest first, then importance, then id."""
        if not ids or limit <= 0:
            return []
        result = await self._conn.query(
            f"""
            UNWIND $ids AS id
            MATCH (a:Memory {{id: id}})-[e]-(n:Memory)
            WHERE a.tenant = $tenant AND n.tenant = $tenant AND NOT n.id IN $exclude
            WITH n, max(coalesce(e.strength, 0.0)) AS strength
            RETURN strength, {RETURN_FIELDS}
            ORDER BY strength DESC, n.importance DESC, n.id ASC LIMIT $limit
            """,
            {"tenant": tenant, "ids": ids, "exclude": exclude, "limit": limit},
        )
        return [(read_row(values), float(strength)) for strength, *values in result.result_set]

    async def edges_among(self, tenant: str, ids: list[str], limit: int) -> list[Relation]:
        """The edges whose two ends are among `ids`, strongest first."""
        if not ids or limit <= 0:
            return []
        result = await self._conn.query(
            """
            UNWIND $ids AS id
            MATCH (a:Memory {id: id})-[e]->(b:Memory)
            WHERE a.tenant = $tenant AND b.tenant = $tenant AND b.id IN $ids
            RETURN a.id, type(e), b.id, properties(e)
            ORDER BY coalesce(e.strength, 0.0) DESC, a.id, type(e), b.id LIMIT $limit
            """,
            {"tenant": tenant, "ids": ids, "limit": limit},
        )
        return [edge_relation(source, kind, True, target, props) for source, kind, target, props in result.result_set]

    async def patterns_among(self, tenant: str, ids: list[str], limit: int) -> list[PatternNode]:
        """MetaPatterns with a member among `ids` (the member edge of any type
        or direction: consolidation's to choose), largest first, with their
        edges to those members. MetaPattern is its own label, never :Memory,
        so this is the one read that reaches them."""
        if not ids or limit <= 0:
            return []
        result = await self._conn.query(
            """
            UNWIND $ids AS id
            MATCH (p:MetaPattern)-[e]-(m:Memory {id: id})
            WHERE p.tenant = $tenant AND m.tenant = $tenant
            WITH p, collect([type(e), startNode(e) = p, m.id, properties(e)]) AS members
            WITH p, members, coalesce(p.size, size(members)) AS size
            RETURN p.id, coalesce(p.summary, ''), size, members ORDER BY size DESC, p.id LIMIT $limit
            """,
            {"tenant": tenant, "ids": ids, "limit": limit},
        )
        return [
            PatternNode(pattern_id, summary, int(size), [edge_relation(pattern_id, *member) for member in members])
            for pattern_id, summary, size, members in result.result_set
        ]

    async def analysis_figures(self, tenant: str, *, now_us: int, top: int, max_hops: int = 5) -> AnalysisFigures:
        """The counts behind GET /analyze, over every memory of the tenant;
        `max_hops` bounds the supersession chains walked (as the state pass's)."""
        params = {"tenant": tenant, "now": now_us, "top": top}
        # Cypher takes no parameter as a path bound: the int is formatted in.
        summary_query = _ANALYSIS_SUMMARY.replace("{hops}", str(max(1, int(max_hops))))
        summary, types, trust, days, hours, tags, entities, patterns, preferences = await asyncio.gather(
            self._conn.query(summary_query, params),
            self._conn.query(
                """
                MATCH (m:Memory) WHERE m.tenant = $tenant
                RETURN coalesce(m.type, ''), count(m), avg(m.confidence), avg(m.importance)
                """,
                params,
            ),
            self._conn.query(
                """
                MATCH (m:Memory) WHERE m.tenant = $tenant
                WITH CASE WHEN coalesce(m.trust_state, '') = '' THEN 'active' ELSE m.trust_state END AS state
                RETURN state, count(*)
                """,
                params,
            ),
            self._conn.query(
                """
                MATCH (m:Memory) WHERE m.tenant = $tenant
                RETURN toInteger(floor(m.timestamp / 86400000000.0)) AS day, count(m)
                """,
                params,
            ),
            self._conn.query(
                """
                MATCH (m:Memory) WHERE m.tenant = $tenant
                WITH toInteger(floor(m.timestamp / 3600000000.0)) AS h, m
                RETURN ((h % 24) + 24) % 24 AS hour, count(m), avg(m.importance)
                """,
                params,
            ),
            self._conn.query(
                """
                MATCH (m:Memory) WHERE m.tenant = $tenant
                UNWIND m.tags AS tag
                WITH toLower(trim(tag)) AS t WHERE t <> '' AND NOT t STARTS WITH 'entity:'
                RETURN t, count(*) AS n ORDER BY n DESC, t LIMIT $top
                """,
                params,
            ),
            self._conn.query(
                """
                MATCH (m:Memory) WHERE m.tenant = $tenant
                UNWIND m.tags AS tag
                WITH toLower(trim(tag)) AS t WHERE t STARTS WITH 'entity:'
                RETURN t, count(*) AS n ORDER BY n DESC, t LIMIT $top
                """,
                params,
            ),
            self._conn.query(
                """
                MATCH (p:Pattern) WHERE p.tenant = $tenant
                RETURN p.type, p.entity_tag, p.members ORDER BY p.members DESC, p.key LIMIT 10
                """,
                params,
            ),
            self._conn.query(
                """
                MATCH (a:Memory)-[r:PREFERS_OVER]->(b:Memory) WHERE a.tenant = $tenant AND b.tenant = $tenant
                RETURN a.id, a.content, b.id, b.content, r.context, coalesce(r.strength, 0.0)
                ORDER BY coalesce(r.strength, 0.0) DESC, a.id, b.id LIMIT 10
                """,
                params,
            ),
        )
        (total, avg_importance, avg_confidence, first, last, archived, expired, not_yet_valid, superseded, current,
         c_low, c_medium, c_high, i_low, i_medium, i_high) = summary.result_set[0]  # fmt: skip
        return AnalysisFigures(
            total=int(total),
            average_importance=avg_importance if total else None,
            average_confidence=avg_confidence if total else None,
            first=from_micros(first),
            last=from_micros(last),
            states={
                "current": int(current or 0),
                "archived": int(archived or 0),
                "expired": int(expired or 0),
                "not_yet_valid": int(not_yet_valid or 0),
                "superseded": int(superseded or 0),
            },
            trust_states={state: int(n) for state, n in trust.result_set},
            by_type=[TypeFigures(kind, int(n), float(c or 0.0), float(i or 0.0)) for kind, n, c, i in types.result_set],
            confidence_buckets={"low": int(c_low or 0), "medium": int(c_medium or 0), "high": int(c_high or 0)},
            importance_buckets={"low": int(i_low or 0), "medium": int(i_medium or 0), "high": int(i_high or 0)},
            days=[(int(day), int(n)) for day, n in days.result_set if day is not None],
            hours=[(int(hour), int(n), float(i or 0.0)) for hour, n, i in hours.result_set if hour is not None],
            tags=[(tag, int(n)) for tag, n in tags.result_set],
            entity_tags=[(tag, int(n)) for tag, n in entities.result_set],
            patterns=[(kind or "", tag or "", int(members or 0)) for kind, tag, members in patterns.result_set],
            preferences=[
                (a, a_text, b, b_text, context, float(strength))
                for a, a_text, b, b_text, context, strength in preferences.result_set
            ],
        )


class FalkorGraphExport:
    """GraphExport on FalkorDB: pages in id order."""

    def __init__(self, connection: FalkorConnection):
        self._conn = connection

    async def memory_ids(self, tenant: str, after_id: str, limit: int) -> list[str]:
        """A page of the tenant's memory ids, in id order after `after_id`."""
        result = await self._conn.query(
            "MATCH (m:Memory) WHERE m.tenant = $tenant AND m.id > $after RETURN m.id ORDER BY m.id LIMIT $limit",
            {"tenant": tenant, "after": after_id, "limit": limit},
        )
        return [row[0] for row in result.result_set]
