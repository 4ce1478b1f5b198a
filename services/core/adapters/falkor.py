"""FalkorGraphStore: the graph, source of truth, on FalkorDB.

Times are stored as epoch microseconds (exact and sortable), metadata as JSON
text (FalkorDB refuses map properties), the embedding as base64 float32 so the
vector index can be rebuilt from the graph without re-embedding.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from array import array
from dataclasses import dataclass
from typing import Any

import redis.exceptions as redis_errors
import structlog
from falkordb.asyncio import FalkorDB

from memgrid.v1 import events_pb2
from services.core.adapters.falkor_reply import params_header, read_reply
from services.core.adapters.retry import with_backoff
from services.core.codec import event_from_pb, event_to_pb
from services.core.domain.analysis import AnalysisFigures, TypeFigures
from services.core.domain.errors import DeadlineExceeded, Unavailable
from services.core.domain.factuality import lift_factuality
from services.core.domain.model import (
    SUPERSESSION_RELATIONS,
    TIME_FIELDS,
    ComponentStatus,
    Memory,
    MemoryEvent,
    Relation,
)
from services.core.domain.recall import DF_REACH, Scope, TextHit, df_count_cap
from services.core.domain.state import Successor
from services.core.domain.times import from_micros, to_micros
from services.core.ports import ExportedEdge, GraphStats, IdempotencyClaim, OutboxEntry

#: The properties enrichment owns (and the version it bumps).
_ENRICHMENT_FIELDS = (
    "embedding", "summary", "enriched_at", "metadata", "factuality", "tags", "tag_prefixes", "search_tags",
    "search_meta", "version",
)  # fmt: skip
#: Nullable properties: an update that clears them must remove them.
_NULLABLE = ("embedding", "relevance_score", "t_invalid", "enriched_at", "superseded_at", "archived_at")
_INDEXES = (
    ("Memory", "id"),
    ("Memory", "tenant"),
    ("Memory", "timestamp"),  # PRECEDED_BY's range scans
    ("Outbox", "id"),
    ("Outbox", "created_at"),
    ("IdempotencyKey", "key"),
    # Enrichment's MERGEs and its Pattern grouping look these up; without an
    # index each lookup scanned every Entity (or Pattern) node.
    ("Entity", "tag"),
    ("Entity", "tenant"),
    ("Pattern", "key"),
    ("Pattern", "tenant"),
)


#: Node ids the factuality migration in ensure_schema reads per query.
FACTUALITY_MIGRATION_PAGE = 2000
#: How long a word's document frequency is trusted (by default), and how many are kept.
DF_CACHE_SECONDS = 300.0
DF_CACHE_SIZE = 50_000
#: Full-text fields of Memory: the keyword, tag and metadata arms.
_FULLTEXT_FIELDS = ("content", "search_tags", "search_meta")
#: What a read returns of a node: everything but the embedding and the search copies.
_READ_FIELDS = (
    "id", "tenant", "content", "type", "confidence", "importance", "tags", "tag_prefixes", "metadata", "summary",
    "archived", "relevance_score", "version", "factuality", *TIME_FIELDS,
)  # fmt: skip
_RETURN_FIELDS = ", ".join(f"n.{name}" for name in _READ_FIELDS)
#: The arm each full-text field serves.
ARM_FIELDS = {"keyword": "content", "tag": "search_tags", "metadata": "search_meta"}


@dataclass(frozen=True, slots=True)
class EntityBounds:
    """How far a recall's entity expansion reads (RECALL_ENTITY_*): at most
    per_seed entities of each seed, the rarest first; none mentioned by more
    than max_mentions memories (the stopwords of entities: a shared mention
    of one says little and would read thousands of edges); at most max_reads
    (entity, memory) pairs in all."""

    per_seed: int = 5
    max_mentions: int = 200
    max_reads: int = 1000


def _counted_far_enough(cached: tuple[int, float, int | None], cap: int | None) -> bool:
    """Whether a cached document frequency answers a request counting up to `cap` (None: exactly)."""
    count, _, counted_to = cached
    return counted_to is None or count < counted_to or (cap is not None and counted_to >= cap)


def _read_row(values) -> Memory:
    return row_to_memory({k: v for k, v in zip(_READ_FIELDS, values, strict=True) if v is not None})


def scope_where(scope: Scope, alias: str = "n", *, with_archived: bool = False) -> tuple[str, dict[str, Any]]:
    """The Cypher condition and parameters of a candidate Scope (the graph
    arms apply the same rules as VectorQuery does in the vector index);
    archived memories are left out unless with_archived."""
    n = alias
    parts = [f"{n}.tenant = $tenant"]
    if not with_archived:
        parts.append(f"NOT coalesce({n}.archived, false)")
    params: dict[str, Any] = {"tenant": scope.tenant}
    if not scope.history:
        params["at"] = to_micros(scope.at)
        parts.append(f"({n}.t_valid IS NULL OR {n}.t_valid <= $at)")
        parts.append(
            f"({n}.t_invalid IS NULL OR {n}.t_invalid > $at"
            f" OR ({n}.superseded_at IS NOT NULL AND {n}.superseded_at <= $at))"
        )
    if scope.as_of is not None:
        params["as_of"] = to_micros(scope.as_of)
        parts.append(f"{n}.recorded_at <= $as_of")
    exact = scope.tag_match == "exact"
    if scope.tags:
        params["tags"] = list(scope.tags)
        if exact:
            one = f"any(t IN {n}.tags WHERE toLower(t) = x)"
            parts.append(
                f"any(t IN {n}.tags WHERE toLower(t) IN $tags)"
                if scope.tag_mode == "any"
                else f"all(x IN $tags WHERE {one})"
            )
        else:
            parts.append(
                f"any(p IN {n}.tag_prefixes WHERE p IN $tags)"
                if scope.tag_mode == "any"
                else f"all(x IN $tags WHERE x IN {n}.tag_prefixes)"
            )
    if scope.exclude_tags:
        params["exclude_tags"] = list(scope.exclude_tags)
        field = f"[t IN {n}.tags | toLower(t)]" if exact else f"{n}.tag_prefixes"
        parts.append(f"NOT any(p IN {field} WHERE p IN $exclude_tags)")
    if scope.window.start is not None:
        params["window_start"] = to_micros(scope.window.start)
        parts.append(f"{n}.timestamp >= $window_start")
    if scope.window.end is not None:
        params["window_end"] = to_micros(scope.window.end)
        parts.append(f"{n}.timestamp < $window_end")
    return " AND ".join(parts), params


def rarest_within(words: list[str], df: dict[str, int], scan: int) -> list[str]:
    """The words, rarest first, while their document frequencies add up to
    no more than scan (the rarest always)."""
    taken, total = [], 0
    for word in sorted(dict.fromkeys(words), key=lambda w: (df.get(w, 0), w)):
        total += df.get(word, 0)
        if taken and total > scan:
            break
        taken.append(word)
    return taken


def fulltext_query(field: str, words: list[str]) -> str | None:
    """A RediSearch query matching any of the words in one field; the words
    are alphanumeric (domain tokens), so nothing needs escaping."""
    words = [w for w in dict.fromkeys(words) if w.isalnum()]
    if not words:
        return None
    return f"@{field}:({'|'.join(words)})"


_ORDERS = {
    "importance": "n.importance DESC, n.timestamp DESC, n.id ASC",
    "time_desc": "n.timestamp DESC, n.id ASC",
    "time_asc": "n.timestamp ASC, n.id ASC",
    "updated_desc": "n.updated_at DESC, n.id ASC",
    "updated_asc": "n.updated_at ASC, n.id ASC",
}


#: Node labels a backup exports besides Memory.
_EXPORTED_LABELS = ("Entity", "Pattern")
#: One pass over a tenant's memories for the figures of GET /analyze: totals,
#: averages, span, states (one each, in the current-state pass's order:
#: superseded, archived, not yet valid, expired) and the confidence and
#: importance buckets. As in the pass (services/core/domain/state.py), a
#: memory is superseded only when a chain of supersession edges (existing at
#: $now, at most {hops} long) leads from it to another memory that is current
#: itself; the chain is looked for only where superseded_at is set.
_ANALYSIS_SUMMARY = """
MATCH (m:Memory) WHERE m.tenant = $tenant
WITH m, CASE
    WHEN m.superseded_at IS NULL OR m.superseded_at > $now THEN false
    ELSE size([p = (m)-[:INVALIDATED_BY|EVOLVED_INTO*1..{hops}]->(h:Memory)
               WHERE h <> m AND h.tenant = $tenant AND NOT coalesce(h.archived, false)
                 AND (h.t_valid IS NULL OR h.t_valid <= $now) AND (h.t_invalid IS NULL OR h.t_invalid > $now)
                 AND all(r IN relationships(p) WHERE r.created_at IS NULL OR r.created_at <= $now) | h.id]) > 0
    END AS replaced
WITH m, CASE
    WHEN replaced THEN 'superseded'
    WHEN coalesce(m.archived, false) THEN 'archived'
    WHEN m.t_valid IS NOT NULL AND m.t_valid > $now THEN 'not_yet_valid'
    WHEN m.t_invalid IS NOT NULL AND m.t_invalid <= $now THEN 'expired'
    ELSE 'current' END AS state
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


log = structlog.get_logger()

#: How FalkorDB refuses a query whose TIMEOUT is above its TIMEOUT_MAX.
_ABOVE_TIMEOUT_MAX = "The query TIMEOUT parameter value cannot exceed"
#: How much longer than the query timeout the client waits for a reply before
#: giving up on the connection (the server stops the query at its timeout).
_SOCKET_MARGIN_SECONDS = 5.0


def _retryable(exc: BaseException) -> bool:
    """Errors after which the query surely did not run: retried while FalkorDB
    comes up. A timeout is not among them: FalkorDB stopped the query
    ("Query timed out"), or the reply was lost after it ran; running it again
    would cost the same time again, or repeat a write."""
    if isinstance(exc, redis_errors.TimeoutError):
        return str(exc).startswith("Timeout connecting")
    if isinstance(exc, (redis_errors.ConnectionError, redis_errors.BusyLoadingError)):
        return True
    return isinstance(exc, redis_errors.ResponseError) and str(exc).startswith("LOADING")


def timed_out(exc: BaseException) -> bool:
    """Whether a query failed on a time limit: FalkorDB's own, or no reply on the socket in time."""
    if isinstance(exc, redis_errors.TimeoutError):
        return not _retryable(exc)
    return isinstance(exc, redis_errors.ResponseError) and str(exc).startswith("Query timed out")


def _config_value(reply) -> int:
    """The value of a GRAPH.CONFIG GET reply ([name, value])."""
    value = reply[1] if isinstance(reply, (list, tuple)) and len(reply) == 2 else reply
    return int(value.decode() if isinstance(value, bytes) else value)


def encode_embedding(values: list[float] | None) -> str | None:
    """float32 little-endian, base64: about 2 KB for 384 dimensions."""
    if values is None:
        return None
    packed = array("f", values)
    if packed.itemsize != 4:  # pragma: no cover - every supported platform has 4-byte floats
        raise RuntimeError("float is not 32-bit here")
    return base64.b64encode(packed.tobytes()).decode("ascii")


def decode_embedding(text: str | None) -> list[float] | None:
    if not text:
        return None
    packed = array("f")
    packed.frombytes(base64.b64decode(text))
    return packed.tolist()


def memory_to_row(memory: Memory, *, keep_nulls: bool = False) -> dict[str, Any]:
    """The node's properties. None values are left out (FalkorDB drops them),
    or, with keep_nulls, kept for the nullable fields so `SET m += row`
    removes what an update cleared."""
    row: dict[str, Any] = {
        "id": memory.id,
        "tenant": memory.tenant,
        "content": memory.content,
        "type": memory.type,
        "confidence": float(memory.confidence),
        "importance": float(memory.importance),
        "tags": list(memory.tags),
        "tag_prefixes": list(memory.tag_prefixes),
        "metadata": json.dumps(memory.metadata, ensure_ascii=False),
        "embedding": encode_embedding(memory.embedding),
        "summary": memory.summary,
        "archived": bool(memory.archived),
        "relevance_score": memory.relevance_score,
        "version": int(memory.version),
        # JSON text, as metadata: FalkorDB refuses map properties.
        "factuality": None if memory.factuality is None else json.dumps(memory.factuality, ensure_ascii=False),
    }
    for name in TIME_FIELDS:
        row[name] = to_micros(getattr(memory, name))
    row["search_tags"] = search_tags(memory.tags)
    row["search_meta"] = search_meta(memory.metadata)
    return {k: v for k, v in row.items() if v is not None or (keep_nulls and k in _NULLABLE)}


_TAG_SEPARATORS = str.maketrans({":": " ", "/": " ", "-": " ", "_": " "})
#: Metadata keys the metadata arm does not search (bookkeeping, or copies of the content).
_UNSEARCHED_METADATA = frozenset({"enrichment", "original_content", "summary"})
_SEARCH_META_CHARS = 2000


def search_tags(tags: list[str]) -> str:
    """The tags as words, for the full-text index (the tag arm)."""
    return " ".join(tag.translate(_TAG_SEPARATORS) for tag in tags)


def search_meta(metadata: dict) -> str:
    """Metadata's text values (entities included), for the metadata arm."""
    words: list[str] = []

    def walk(value) -> None:
        if isinstance(value, str):
            words.append(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                if key not in _UNSEARCHED_METADATA:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(metadata if isinstance(metadata, dict) else {})
    return " ".join(words)[:_SEARCH_META_CHARS]


def row_to_memory(row: dict[str, Any]) -> Memory:
    """The inverse of memory_to_row. A record an earlier release enriched
    still holds its factuality in metadata (until ensure_schema moves it):
    it is read as the new shape, so a write never puts it back."""
    times = {name: from_micros(row.get(name)) for name in TIME_FIELDS}
    metadata, factuality = lift_factuality(
        json.loads(row.get("metadata") or "{}"),
        json.loads(row["factuality"]) if row.get("factuality") else None,
        enriched=times["enriched_at"] is not None,
    )
    return Memory(
        id=row["id"],
        tenant=row["tenant"],
        content=row["content"],
        type=row["type"],
        confidence=float(row["confidence"]),
        importance=float(row["importance"]),
        tags=list(row.get("tags") or []),
        tag_prefixes=list(row.get("tag_prefixes") or []),
        metadata=metadata,
        embedding=decode_embedding(row.get("embedding")),
        summary=row.get("summary") or "",
        archived=bool(row.get("archived", False)),
        relevance_score=row.get("relevance_score"),
        version=int(row.get("version", 1)),
        factuality=factuality,
        **times,
    )


def outbox_row(event: MemoryEvent, created_us: int) -> dict[str, Any]:
    """An event waiting in the graph until the bus acknowledges it."""
    payload = base64.b64encode(event_to_pb(event).SerializeToString()).decode("ascii")
    return {"id": event.event_id, "tenant": event.tenant, "payload": payload, "created_at": created_us}


def relation_row(relation: Relation) -> dict[str, Any]:
    return {"strength": relation.strength, "created_at": to_micros(relation.created_at), **relation.properties}


#: Claims an idempotency key for this request (or takes over an expired one);
#: the rest of the query runs only when the claim is ours.
_CLAIM = """
MERGE (k:IdempotencyKey {tenant: $tenant, key: $key})
ON CREATE SET k.owner = $owner, k.request_hash = $hash, k.memory_ids = $ids, k.expires_at = $expires
ON MATCH SET
    k.owner = CASE WHEN k.expires_at < $now THEN $owner ELSE k.owner END,
    k.request_hash = CASE WHEN k.expires_at < $now THEN $hash ELSE k.request_hash END,
    k.memory_ids = CASE WHEN k.expires_at < $now THEN $ids ELSE k.memory_ids END,
    k.expires_at = CASE WHEN k.expires_at < $now THEN $expires ELSE k.expires_at END
WITH k WHERE k.owner = $owner
"""


def _claim_params(claim: IdempotencyClaim, memory_ids: list[str], now_us: int) -> dict[str, Any]:
    return {
        "tenant": claim.tenant,
        "key": claim.key,
        "owner": claim.owner,
        "hash": claim.request_hash,
        "ids": memory_ids,
        "expires": claim.expires_us,
        "now": now_us,
    }


def _edge_relation(memory_id: str, rel_type: str, outgoing: bool, other: str, props) -> Relation:
    """An edge read from one of its ends, as a Relation."""
    props = dict(props)
    strength = float(props.pop("strength", 0.0))
    created_at = from_micros(props.pop("created_at", 0))
    source, target = (memory_id, other) if outgoing else (other, memory_id)
    return Relation(source, target, rel_type, strength, created_at, props)


class FalkorGraphStore:
    """GraphStore on FalkorDB; every query filters on the tenant.

    Each write and the events it causes are one query (a transactional
    outbox): an acknowledged write always has its events recorded, whether
    or not the bus was reachable.
    """

    def __init__(
        self,
        *,
        host: str,
        port: int,
        graph: str,
        password: str | None = None,
        wait_seconds: float = 120.0,
        retry_initial_seconds: float = 0.1,
        retry_max_seconds: float = 2.0,
        request_retry_seconds: float = 3.0,
        df_cache_seconds: float = DF_CACHE_SECONDS,
        entity_bounds: EntityBounds | None = None,
        query_timeout_ms: int = 0,
    ):
        self._connect_args: dict[str, Any] = {"host": host, "port": port, "password": password}
        #: Sent with every query (GRAPH.QUERY ... TIMEOUT); 0 sends none.
        self._timeout_ms = max(0, int(query_timeout_ms))
        if self._timeout_ms:
            self._connect_args["socket_timeout"] = self._timeout_ms / 1000 + _SOCKET_MARGIN_SECONDS
        #: The server's (TIMEOUT_DEFAULT, TIMEOUT_MAX) as ensure_schema read them; None: not read.
        self.server_timeouts: tuple[int, int] | None = None
        self._graph_name = graph
        self._db: FalkorDB | None = None
        self._graph = None
        self._where = f"{host}:{port}/{graph}"
        self._wait = wait_seconds
        self._initial = retry_initial_seconds
        self._max = retry_max_seconds
        self._request_retry = request_retry_seconds
        self._df_cache_seconds = df_cache_seconds
        self._entity_bounds = entity_bounds or EntityBounds()
        #: (tenant, field, word) -> (count, when, the cap it was counted to or None: exact).
        self._df_cache: dict[tuple[str, str, str], tuple[int, float, int | None]] = {}

    async def _attempt(self, cypher: str, params: dict[str, Any] | None):
        if self._graph is None:
            # The client probes the server synchronously when built: keep that off the loop.
            self._db = await asyncio.to_thread(FalkorDB, **self._connect_args)
            self._graph = self._db.select_graph(self._graph_name)
        # The library's query(), with a faster reader for all-scalar replies (falkor_reply.py).
        try:
            response = await self._send(cypher, params)
        except redis_errors.ResponseError as exc:
            # The server's TIMEOUT_MAX is below ours (lowered since start-up, or met
            # before check_timeouts ran): FalkorDB refused the query without running
            # it, so it is sent again once with the server's limit.
            before = self._timeout_ms
            if not str(exc).startswith(_ABOVE_TIMEOUT_MAX) or await self.check_timeouts() is None:
                raise
            if self._timeout_ms == before:
                raise
            response = await self._send(cypher, params)
        return await read_reply(self._graph, response)

    async def _send(self, cypher: str, params: dict[str, Any] | None):
        timeout = ("TIMEOUT", str(self._timeout_ms)) if self._timeout_ms else ()
        return await self._graph.execute_command(
            "GRAPH.QUERY", self._graph_name, params_header(params) + cypher, "--compact", *timeout
        )

    async def _query(self, cypher: str, params: dict[str, Any] | None = None, *, deadline: float | None = None):
        try:
            return await with_backoff(
                "falkordb",
                lambda: self._attempt(cypher, params),
                retryable=_retryable,
                deadline_seconds=self._request_retry if deadline is None else deadline,
                initial_seconds=self._initial,
                max_seconds=self._max,
            )
        except Exception as exc:
            if timed_out(exc):
                raise DeadlineExceeded(
                    "FALKORDB_QUERY_TIMEOUT",
                    f"the graph query did not finish within {self._timeout_ms} ms (FALKORDB_QUERY_TIMEOUT_MS): {exc}",
                    timeout_ms=self._timeout_ms,
                ) from exc
            if _retryable(exc):
                raise Unavailable("FALKORDB_UNAVAILABLE", f"FalkorDB is unavailable: {exc}") from exc
            raise

    async def check_timeouts(self) -> tuple[int, int] | None:
        """Read the server's TIMEOUT_DEFAULT and TIMEOUT_MAX (milliseconds, 0:
        none) and warn where they leave queries unbounded. Not a refusal:
        memgrid's own queries carry their TIMEOUT whatever the server says,
        and a managed server may not let us change its settings; but without
        TIMEOUT_MAX any other client's query can hold the server's threads
        (and every memgrid query behind it) for as long as it runs. A
        TIMEOUT_MAX below FALKORDB_QUERY_TIMEOUT_MS would make FalkorDB
        refuse every query, so the timeout sent comes down to it. None when
        the server does not let us read them."""
        assert self._graph is not None
        try:
            default = _config_value(await self._graph.execute_command("GRAPH.CONFIG", "GET", "TIMEOUT_DEFAULT"))
            maximum = _config_value(await self._graph.execute_command("GRAPH.CONFIG", "GET", "TIMEOUT_MAX"))
        except (redis_errors.ResponseError, ValueError, TypeError) as exc:
            log.warning("could not read FalkorDB's query timeouts", where=self._where, error=str(exc))
            return None
        self.server_timeouts = (default, maximum)
        if not default or not maximum:
            log.warning(
                "FalkorDB has no query timeout set: a query sent without TIMEOUT runs until it ends",
                where=self._where,
                timeout_default_ms=default,
                timeout_max_ms=maximum,
                hint="load the module with TIMEOUT_DEFAULT and TIMEOUT_MAX (the devstack does)",
            )
        if maximum and self._timeout_ms > maximum:
            log.warning(
                "FALKORDB_QUERY_TIMEOUT_MS is above the server's TIMEOUT_MAX; sending TIMEOUT_MAX instead",
                configured_ms=self._timeout_ms,
                timeout_max_ms=maximum,
            )
            self._timeout_ms = maximum
        if not self._timeout_ms:
            log.warning("FALKORDB_QUERY_TIMEOUT_MS is 0: memgrid's queries carry no timeout of their own")
        return self.server_timeouts

    async def ensure_schema(self) -> None:
        """Wait for FalkorDB (it answers LOADING after a restart), check its
        query timeouts, then create indexes."""
        await self._query("RETURN 1", deadline=self._wait)
        await self.check_timeouts()
        for label, prop in _INDEXES:
            try:
                await self._query(f"CREATE INDEX FOR (n:{label}) ON (n.{prop})")
            except redis_errors.ResponseError as exc:
                if "already indexed" not in str(exc):
                    raise
        result = await self._query("CALL db.indexes() YIELD label, properties, types RETURN label, properties, types")
        indexed = {
            (label, prop)
            for label, props, types in result.result_set
            for prop in props
            if "FULLTEXT" in types.get(prop, [])
        }
        missing = [field for field in _FULLTEXT_FIELDS if ("Memory", field) not in indexed]
        if missing:
            fields = ", ".join(f"'{field}'" for field in missing)
            await self._query(
                f"CALL db.idx.fulltext.createNodeIndex({{label: 'Memory', language: 'english'}}, {fields})"
            )
        # Records written before superseded_at was kept: reads look for supersession edges only where it is set.
        await self._query(
            "MATCH (n:Memory)-[s:INVALIDATED_BY|EVOLVED_INTO]->(:Memory) WHERE n.superseded_at IS NULL "
            "SET n.superseded_at = s.created_at"
        )
        await self.migrate_factuality()

    async def migrate_factuality(self, page_size: int = FACTUALITY_MIGRATION_PAGE) -> int:
        """Move the factuality an earlier release's enrichment wrote into
        metadata out to its own property. Idempotent. One scan finds the
        span of node ids holding candidates; it is then read a window of
        `page_size` ids at a time (an id range seek, so each query reads only
        its window and the whole pass is one walk over the nodes). A record
        whose metadata.factuality is the client's own is left as it is; one
        written meanwhile (its version moved) is left to the writer, which
        wrote the new shape (row_to_memory lifts it on read). Returns how
        many it moved."""
        candidates = "n.factuality IS NULL AND n.enriched_at IS NOT NULL AND n.metadata CONTAINS '\"factuality\"'"
        span = await self._query(f"MATCH (n:Memory) WHERE {candidates} RETURN min(id(n)), max(id(n))")
        low, high = span.result_set[0] if span.result_set else (None, None)
        if low is None:
            return 0
        moved = 0
        for start in range(low, high + 1, page_size):
            result = await self._query(
                f"""
                MATCH (n:Memory) WHERE id(n) >= $start AND id(n) < $stop AND {candidates}
                RETURN n.id, n.tenant, n.version, n.metadata
                """,
                {"start": start, "stop": start + page_size},
            )
            items = []
            for memory_id, tenant, version, text in result.result_set:
                metadata, factuality = lift_factuality(json.loads(text or "{}"), None, enriched=True)
                if factuality is not None:
                    items.append(
                        {
                            "id": memory_id,
                            "tenant": tenant,
                            "version": version,
                            "metadata": json.dumps(metadata, ensure_ascii=False),
                            "factuality": json.dumps(factuality, ensure_ascii=False),
                        }
                    )
            if items:
                written = await self._query(
                    """
                    UNWIND $items AS it
                    MATCH (n:Memory {id: it.id})
                    WHERE n.tenant = it.tenant AND n.version = it.version AND n.factuality IS NULL
                    SET n.metadata = it.metadata, n.factuality = it.factuality
                    RETURN count(n)
                    """,
                    {"items": items},
                )
                moved += written.result_set[0][0]
        return moved

    # Writes -------------------------------------------------------------------------------------------

    async def create_memories(
        self, memories: list[Memory], events: list[MemoryEvent], *, now_us: int, claim: IdempotencyClaim | None = None
    ) -> bool:
        """Create the nodes and their events in one query. With a claim, the
        write happens only if this request owns the idempotency key; returns
        whether it wrote."""
        rows = [
            {"node": memory_to_row(m), "outbox": outbox_row(e, now_us)} for m, e in zip(memories, events, strict=True)
        ]
        create = "UNWIND $rows AS r CREATE (m:Memory) SET m = r.node CREATE (x:Outbox) SET x = r.outbox"
        if claim is None:
            await self._query(create, {"rows": rows})
            return True
        result = await self._query(
            _CLAIM + create + " RETURN count(m)",
            {**_claim_params(claim, [m.id for m in memories], now_us), "rows": rows},
        )
        return bool(result.result_set and result.result_set[0][0])

    async def get_idempotency(self, tenant: str, key: str, now_us: int) -> tuple[str, list[str]] | None:
        """(request hash, memory ids) recorded under a key that has not expired."""
        result = await self._query(
            """
            MATCH (k:IdempotencyKey {key: $key}) WHERE k.tenant = $tenant AND k.expires_at >= $now
            RETURN k.request_hash, k.memory_ids
            """,
            {"tenant": tenant, "key": key, "now": now_us},
        )
        if not result.result_set:
            return None
        request_hash, ids = result.result_set[0]
        return request_hash, list(ids)

    async def purge_idempotency(self, now_us: int) -> int:
        """Forget expired idempotency keys; returns how many."""
        result = await self._query(
            "MATCH (k:IdempotencyKey) WHERE k.expires_at < $now DELETE k RETURN count(k)", {"now": now_us}
        )
        return int(result.result_set[0][0]) if result.result_set else 0

    async def update_memory(self, memory: Memory, expected_version: int, event: MemoryEvent, *, now_us: int) -> bool:
        """Compare-and-set on the version: False when someone wrote in between."""
        result = await self._query(
            """
            MATCH (m:Memory {id: $id}) WHERE m.tenant = $tenant AND m.version = $version
            SET m += $row
            CREATE (x:Outbox) SET x = $outbox
            RETURN count(m)
            """,
            {
                "id": memory.id,
                "tenant": memory.tenant,
                "version": expected_version,
                "row": memory_to_row(memory, keep_nulls=True),
                "outbox": outbox_row(event, now_us),
            },
        )
        return bool(result.result_set and result.result_set[0][0])

    async def delete_memories(self, tenant: str, events: list[MemoryEvent], *, now_us: int) -> list[str]:
        """Delete nodes and their edges (one DELETED event each); returns the ids deleted."""
        result = await self._query(
            """
            UNWIND $items AS it
            MATCH (m:Memory {id: it.id}) WHERE m.tenant = $tenant
            DETACH DELETE m
            CREATE (x:Outbox) SET x = it.outbox
            RETURN it.id
            """,
            {"tenant": tenant, "items": [{"id": e.memory_id, "outbox": outbox_row(e, now_us)} for e in events]},
        )
        return [row[0] for row in result.result_set]

    async def find_ids_by_tags(self, tenant: str, tags_lower: list[str], limit: int) -> list[str]:
        """Ids of memories with any of the tags (exact, case-insensitive)."""
        result = await self._query(
            """
            MATCH (m:Memory) WHERE m.tenant = $tenant AND any(t IN m.tags WHERE toLower(t) IN $tags)
            RETURN m.id LIMIT $limit
            """,
            {"tenant": tenant, "tags": tags_lower, "limit": limit},
        )
        return [row[0] for row in result.result_set]

    async def create_relations(
        self, tenant: str, relations: list[Relation], events: list[MemoryEvent], *, now_us: int
    ) -> list[int]:
        """MERGE the edges whose two ends exist in the tenant (strength and
        properties are refreshed on a repeat); returns the indexes written."""
        by_type: dict[str, list[dict[str, Any]]] = {}
        for index, (relation, event) in enumerate(zip(relations, events, strict=True)):
            by_type.setdefault(relation.type, []).append(
                {
                    "i": index,
                    "src": relation.source_id,
                    "dst": relation.target_id,
                    "props": relation_row(relation),
                    "outbox": outbox_row(event, now_us),
                }
            )
        written: list[int] = []
        for rel_type, items in by_type.items():
            # A supersession edge makes its source superseded (a system time, kept once set).
            supersedes = (
                ", a.superseded_at = coalesce(a.superseded_at, $now)" if rel_type in SUPERSESSION_RELATIONS else ""
            )
            # Relation types cannot be parameters; rel_type comes from the validated vocabulary.
            result = await self._query(
                f"""
                UNWIND $items AS it
                MATCH (a:Memory {{id: it.src}}) WHERE a.tenant = $tenant
                MATCH (b:Memory {{id: it.dst}}) WHERE b.tenant = $tenant
                MERGE (a)-[e:{rel_type}]->(b)
                SET e += it.props{supersedes}
                CREATE (x:Outbox) SET x = it.outbox
                RETURN it.i
                """,
                {"tenant": tenant, "items": items, "now": now_us},
            )
            written.extend(row[0] for row in result.result_set)
        return sorted(written)

    async def supersede(
        self,
        old: Memory,
        expected_version: int,
        replacement: Memory,
        relation: Relation,
        events: list[MemoryEvent],
        *,
        now_us: int,
        claim: IdempotencyClaim | None = None,
    ) -> bool:
        """Store the replacement, close the old memory and link them, in one
        query: all of it or none. False when the old memory changed or
        vanished, or another request holds the idempotency key."""
        claim_part = _CLAIM if claim else ""
        claim_params = _claim_params(claim, [replacement.id], now_us) if claim else {}
        if claim:
            claim_params["tenant"] = old.tenant
        result = await self._query(
            claim_part
            + f"""
            MATCH (old:Memory {{id: $old_id}}) WHERE old.tenant = $tenant AND old.version = $version
            SET old += $old_row
            CREATE (new:Memory) SET new = $new_row
            CREATE (old)-[e:{relation.type}]->(new) SET e = $edge
            WITH old
            UNWIND $outbox AS o CREATE (x:Outbox) SET x = o
            RETURN count(x)
            """,
            {
                "old_id": old.id,
                "tenant": old.tenant,
                "version": expected_version,
                "old_row": memory_to_row(old, keep_nulls=True),
                "new_row": memory_to_row(replacement),
                "edge": relation_row(relation),
                "outbox": [outbox_row(e, now_us) for e in events],
                **claim_params,
            },
        )
        return bool(result.result_set and result.result_set[0][0])

    # Enrichment ---------------------------------------------------------------------------------------

    async def apply_enrichment(
        self, tenant: str, updates: list[tuple[Memory, int]], events: list[MemoryEvent], *, now_us: int
    ) -> list[str]:
        """Write enrichment's own fields where the version is still the one
        enrichment read (a concurrent PATCH wins); returns the ids written."""
        items = []
        for (memory, expected), event in zip(updates, events, strict=True):
            row = memory_to_row(memory, keep_nulls=True)
            owned = {k: row[k] for k in _ENRICHMENT_FIELDS if k in row}
            items.append({"id": memory.id, "version": expected, "row": owned, "outbox": outbox_row(event, now_us)})
        result = await self._query(
            """
            UNWIND $items AS it
            MATCH (m:Memory {id: it.id}) WHERE m.tenant = $tenant AND m.version = it.version
            SET m += it.row
            CREATE (x:Outbox) SET x = it.outbox
            RETURN it.id
            """,
            {"tenant": tenant, "items": items},
        )
        return [row[0] for row in result.result_set]

    async def link_preceding(
        self, tenant: str, items: list[tuple[str, int]], *, window_us: int, limit: int, now_us: int
    ) -> dict[str, int]:
        """PRECEDED_BY from each memory to the most recent earlier ones within the window.

        One read serves the batch: the memories just before its latest one
        (a range scan on the timestamp index, once per batch instead of once
        per memory). A memory whose predecessors lie deeper than that read
        reaches is looked up on its own."""
        if not items:
            return {}
        reach = len(items) + limit
        result = await self._query(
            """
            MATCH (p:Memory)
            WHERE p.tenant = $tenant AND p.timestamp < $hi AND p.timestamp >= $lo
            RETURN p.id, p.timestamp ORDER BY p.timestamp DESC LIMIT $reach
            """,
            {
                "tenant": tenant,
                "hi": max(ts for _, ts in items),
                "lo": min(ts for _, ts in items) - window_us,
                "reach": reach,
            },
        )
        recent = [(memory_id, int(ts)) for memory_id, ts in result.result_set]
        complete = len(recent) < reach
        floor = recent[-1][1] if recent else 0
        pairs: list[dict[str, str]] = []
        deeper: list[tuple[str, int]] = []
        for memory_id, ts in items:
            before = [p for p, pts in recent if ts - window_us <= pts < ts and p != memory_id]
            # Every memory later than the read's oldest is in it: those are surely the most recent.
            sure = [p for p, pts in recent if floor < pts < ts and pts >= ts - window_us and p != memory_id]
            if complete or len(sure) >= limit:
                pairs += [{"src": memory_id, "dst": p} for p in before[:limit]]
            else:
                deeper.append((memory_id, ts))
        counts: dict[str, int] = {}
        if pairs:
            linked = await self._query(
                """
                UNWIND $pairs AS it
                MATCH (m:Memory {id: it.src}) WHERE m.tenant = $tenant
                MATCH (p:Memory {id: it.dst}) WHERE p.tenant = $tenant
                MERGE (m)-[e:PRECEDED_BY]->(p)
                SET e.strength = 1.0, e.created_at = $now
                RETURN m.id, count(p)
                """,
                {"tenant": tenant, "pairs": pairs, "now": now_us},
            )
            counts.update({memory_id: int(count) for memory_id, count in linked.result_set})
        if deeper:
            counts.update(
                await self._link_preceding_each(tenant, deeper, window_us=window_us, limit=limit, now_us=now_us)
            )
        return counts

    async def _link_preceding_each(
        self, tenant: str, items: list[tuple[str, int]], *, window_us: int, limit: int, now_us: int
    ) -> dict[str, int]:
        """link_preceding one memory at a time (a range scan each)."""
        result = await self._query(
            """
            UNWIND $items AS it
            MATCH (m:Memory {id: it.id}) WHERE m.tenant = $tenant
            CALL {
                WITH it
                MATCH (p:Memory)
                WHERE p.tenant = $tenant AND p.timestamp < it.ts AND p.timestamp >= it.ts - $window AND p.id <> it.id
                RETURN p ORDER BY p.timestamp DESC LIMIT $limit
            }
            MERGE (m)-[e:PRECEDED_BY]->(p)
            SET e.strength = 1.0, e.created_at = $now
            RETURN m.id, count(p)
            """,
            {
                "tenant": tenant,
                "items": [{"id": i, "ts": ts} for i, ts in items],
                "window": window_us,
                "limit": limit,
                "now": now_us,
            },
        )
        return {memory_id: int(count) for memory_id, count in result.result_set}

    async def link_similar(self, tenant: str, pairs: list[tuple[str, str, float]], *, now_us: int) -> int:
        """SIMILAR_TO edges (source, neighbour, cosine score)."""
        if not pairs:
            return 0
        result = await self._query(
            """
            UNWIND $pairs AS it
            MATCH (a:Memory {id: it.src}) WHERE a.tenant = $tenant
            MATCH (b:Memory {id: it.dst}) WHERE b.tenant = $tenant
            MERGE (a)-[e:SIMILAR_TO]->(b)
            SET e.strength = it.score, e.score = it.score, e.created_at = $now
            RETURN count(e)
            """,
            {"tenant": tenant, "pairs": [{"src": a, "dst": b, "score": s} for a, b, s in pairs], "now": now_us},
        )
        return int(result.result_set[0][0]) if result.result_set else 0

    async def link_entities_and_patterns(
        self,
        tenant: str,
        mentions: list[tuple[str, str, list[str]]],
        *,
        min_members: int,
        max_members: int,
        now_us: int,
    ) -> dict[str, int]:
        """MENTIONS edges from memories to their Entity nodes, then a Pattern
        (with EXEMPLIFIES edges) wherever at least `min_members` memories of
        one type mention one entity. `mentions` holds (memory id, type,
        entity tags). Returns, per memory id, how many patterns it exemplifies."""
        items = [{"id": i, "type": t, "tag": tag} for i, t, tags in mentions for tag in tags]
        if not items:
            return {}
        await self._query(
            """
            UNWIND $items AS it
            MATCH (m:Memory {id: it.id}) WHERE m.tenant = $tenant
            MERGE (e:Entity {tenant: $tenant, tag: it.tag})
            MERGE (m)-[r:MENTIONS]->(e)
            SET r.created_at = $now
            """,
            {"tenant": tenant, "items": items, "now": now_us},
        )
        pairs = [{"type": t, "tag": tag} for t, tag in sorted({(it["type"], it["tag"]) for it in items})]
        groups = await self._query(
            """
            UNWIND $pairs AS p
            MATCH (e:Entity {tag: p.tag})<-[:MENTIONS]-(m:Memory)
            WHERE e.tenant = $tenant AND m.tenant = $tenant AND m.type = p.type
            WITH p, collect(m.id) AS ids
            WHERE size(ids) >= $min
            RETURN p.type, p.tag, ids[0..$max]
            """,
            {"tenant": tenant, "pairs": pairs, "min": min_members, "max": max_members},
        )
        patterns = [{"key": f"{t}|{tag}", "type": t, "tag": tag, "ids": ids} for t, tag, ids in groups.result_set]
        if not patterns:
            return {}
        await self._query(
            """
            UNWIND $patterns AS pt
            MERGE (p:Pattern {tenant: $tenant, key: pt.key})
            SET p.type = pt.type, p.entity_tag = pt.tag, p.members = size(pt.ids), p.updated_at = $now
            WITH p, pt
            UNWIND pt.ids AS id
            MATCH (m:Memory {id: id}) WHERE m.tenant = $tenant
            MERGE (m)-[x:EXEMPLIFIES]->(p)
            SET x.strength = 1.0, x.created_at = $now
            """,
            {"tenant": tenant, "patterns": patterns, "now": now_us},
        )
        counts: dict[str, int] = {}
        for pattern in patterns:
            for memory_id in pattern["ids"]:
                counts[memory_id] = counts.get(memory_id, 0) + 1
        return counts

    async def count_unenriched(self, tenant: str) -> int:
        result = await self._query(
            "MATCH (m:Memory {tenant: $tenant}) WHERE m.enriched_at IS NULL RETURN count(m)", {"tenant": tenant}
        )
        return int(result.result_set[0][0])

    async def find_unenriched(self, recorded_before_us: int, limit: int) -> list[tuple[str, str]]:
        """(tenant, id) of memories enrichment has not finished, oldest first."""
        result = await self._query(
            """
            MATCH (m:Memory) WHERE m.enriched_at IS NULL AND m.recorded_at < $before
            RETURN m.tenant, m.id ORDER BY m.recorded_at LIMIT $limit
            """,
            {"before": recorded_before_us, "limit": limit},
        )
        return [(tenant, memory_id) for tenant, memory_id in result.result_set]

    # Outbox -------------------------------------------------------------------------------------------

    async def pending_outbox(self, older_than_us: int, limit: int) -> list[OutboxEntry]:
        """Events recorded before `older_than_us` that the bus never acknowledged."""
        result = await self._query(
            "MATCH (x:Outbox) WHERE x.created_at < $before RETURN x.id, x.payload ORDER BY x.created_at LIMIT $limit",
            {"before": older_than_us, "limit": limit},
        )
        entries = []
        for event_id, payload in result.result_set:
            pb = events_pb2.MemoryEvent()
            pb.ParseFromString(base64.b64decode(payload))
            entries.append(OutboxEntry(event_id, event_from_pb(pb)))
        return entries

    async def delete_outbox(self, event_ids: list[str]) -> None:
        await self._query("UNWIND $ids AS id MATCH (x:Outbox {id: id}) DELETE x", {"ids": event_ids})

    async def count_outbox(self) -> int:
        result = await self._query("MATCH (x:Outbox) RETURN count(x)")
        return int(result.result_set[0][0])

    # Reads --------------------------------------------------------------------------------------------

    async def get_memory(self, tenant: str, memory_id: str) -> Memory | None:
        found = await self.get_memories(tenant, [memory_id])
        return found.get(memory_id)

    async def get_memories(self, tenant: str, memory_ids: list[str]) -> dict[str, Memory]:
        result = await self._query(
            "UNWIND $ids AS id MATCH (m:Memory {id: id}) WHERE m.tenant = $tenant RETURN properties(m)",
            {"ids": memory_ids, "tenant": tenant},
        )
        memories = [row_to_memory(dict(row[0])) for row in result.result_set]
        return {m.id: m for m in memories}

    async def read_memory(
        self, tenant: str, memory_id: str, *, accessed_us: int, relation_limit: int
    ) -> tuple[Memory, list[Relation]] | None:
        """One query for a read by id: the record, its access time bumped,
        and its strongest relations."""
        result = await self._query(
            """
            MATCH (m:Memory {id: $id}) WHERE m.tenant = $tenant
            SET m.last_accessed = $at
            WITH m
            OPTIONAL MATCH (m)-[e]-(o:Memory) WHERE o.tenant = $tenant
            WITH m, e, o ORDER BY e.strength DESC
            WITH m, collect(CASE WHEN e IS NULL THEN NULL ELSE [type(e), startNode(e) = m, o.id, properties(e)] END)
                AS edges
            RETURN properties(m), edges[0..$limit]
            """,
            {"id": memory_id, "tenant": tenant, "at": accessed_us, "limit": relation_limit},
        )
        if not result.result_set:
            return None
        row, edges = result.result_set[0]
        return row_to_memory(dict(row)), [_edge_relation(memory_id, *edge) for edge in edges]

    async def document_frequencies(
        self, tenant: str, field: str, words: list[str], *, cap: int | None = None, recount: bool = False
    ) -> dict[str, int]:
        """How many of the tenant's memories hold each word in a full-text
        field; cached per tenant for df_cache_seconds (RECALL_DF_CACHE_SECONDS;
        a stopword filter, not a count). Another tenant's corpus never changes
        the figure, so it neither moves the tenant's scores nor tells the
        tenant how many of others' memories hold a word.

        With cap, counting stops there (the engine yields matches lazily): a
        word in nearly every one of 100k memories took 90 ms to count in
        full, 3 ms to 2,001. A word at the cap holds at least that many."""
        return (await self._frequencies(tenant, {field: words}, cap=cap, recount=recount))[field]

    async def arm_frequencies(self, tenant: str, arms: list[str], words: list[str], *, cap: int) -> None:
        """Count (and cache) the words' document frequencies among the
        tenant's memories in the fields of these arms, all in one query: what
        each arm's search_text reads first, so the arms then find them cached."""
        await self._frequencies(tenant, {ARM_FIELDS[arm]: words for arm in arms}, cap=cap)

    async def _frequencies(
        self, tenant: str, fields: dict[str, list[str]], *, cap: int | None, recount: bool = False
    ) -> dict[str, dict[str, int]]:
        now = time.monotonic()
        found: dict[str, dict[str, int]] = {field: {} for field in fields}
        missing: list[tuple[str, str]] = []
        for field, words in fields.items():
            for word in dict.fromkeys(words):
                cached = self._df_cache.get((tenant, field, word))
                fresh = cached is not None and not recount and now - cached[1] < self._df_cache_seconds
                if fresh and _counted_far_enough(cached, cap):
                    found[field][word] = cached[0]
                elif word.isalnum():
                    missing.append((field, word))
        if not missing:
            return found
        # The full-text index holds every tenant's memories: the tenant's
        # matches are kept before they are counted (and before the cap).
        if cap is None:
            result = await self._query(
                """
                UNWIND $pairs AS p
                CALL db.idx.fulltext.queryNodes('Memory', '@' + p[0] + ':' + p[1]) YIELD node
                WITH p, node WHERE node.tenant = $tenant
                RETURN p[0], p[1], count(node)
                """,
                {"pairs": [list(pair) for pair in missing], "tenant": tenant},
            )
        else:
            # A branch a word (a LIMIT inside an UNWIND's subquery caps all
            # words together); a word without matches yields no row.
            capped = " UNION ALL ".join(
                f"CALL db.idx.fulltext.queryNodes('Memory', '@{field}:' + $w{i}) YIELD node "
                f"WITH node WHERE node.tenant = $tenant "
                f"WITH node LIMIT $cap RETURN '{field}' AS f, $w{i} AS w, count(node) AS n"
                for i, (field, _) in enumerate(missing)
            )
            result = await self._query(
                capped, {"cap": cap, "tenant": tenant, **{f"w{i}": w for i, (_, w) in enumerate(missing)}}
            )
        counted = {(field, word): int(n) for field, word, n in result.result_set}
        for field, word in missing:
            found[field][word] = counted.get((field, word), 0)
            self._df_cache[(tenant, field, word)] = (found[field][word], now, cap)
        while len(self._df_cache) > DF_CACHE_SIZE:
            self._df_cache.pop(next(iter(self._df_cache)))
        return found

    async def sample_texts(self, tenant: str, field: str, size: int) -> list[str]:
        """A random sample of the tenant's memories' texts in a full-text
        field (document frequencies are counted per tenant)."""
        result = await self._query(
            f"MATCH (n:Memory) WHERE n.tenant = $tenant AND n.{field} IS NOT NULL "
            f"WITH n.{field} AS text, rand() AS r ORDER BY r LIMIT $size RETURN text",
            {"tenant": tenant, "size": size},
        )
        return [text for (text,) in result.result_set]

    async def search_text(
        self,
        scope: Scope,
        arm: str,
        words: list[str],
        limit: int,
        *,
        max_df: int | None = None,
        scan: int | None = None,
    ) -> list[TextHit]:
        """An arm over the full-text index (keyword: content, tag: tags,
        metadata: metadata text): (id, score) within the scope, best first.

        With max_df, words held by more memories than that are left out (they
        say little, and every match costs a row); when every word is that
        common, the rarest alone is searched if within DF_REACH x max_df,
        otherwise the arm finds nothing.

        With scan, the arm reads about that many matches at most, its cost at
        scale: the words are searched rarest first while their matches add up
        to no more than scan (the rarest always), and the rarest-word search
        reads at most scan of its matches, in the index's order, the scope then
        keeping those it holds. The words left out are the commonest, whose
        matches rank lowest; at 100k memories a word in 17k of them took 51 ms
        to read in full and 10 ms to 2,000, and with the scope applied first, a
        tag held by 2% of memories made the search read all of them."""
        field = ARM_FIELDS[arm]
        bound = ""
        if max_df is not None and words:
            # Counted just past max_df: enough to tell which words to leave out.
            df = await self.document_frequencies(scope.tenant, field, words, cap=max_df + 1)
            kept = [w for w in words if df.get(w, 0) <= max_df]
            if not kept:
                df = await self.document_frequencies(scope.tenant, field, words, cap=df_count_cap(max_df))
                rarest = min(words, key=lambda w: (df.get(w, 0), w))
                kept = [rarest] if df.get(rarest, 0) <= DF_REACH * max_df else []
                if scan is not None:
                    # collect() makes the bound hold before the scope: FalkorDB
                    # moves a filter ahead of a bare LIMIT.
                    bound = (
                        f"WITH n, score LIMIT {int(scan)} WITH collect([n, score]) AS read "
                        "UNWIND read AS pair WITH pair[0] AS n, pair[1] AS score"
                    )
            elif scan is not None:
                kept = rarest_within(kept, df, scan)
            words = [w for w in kept if df.get(w, 0) > 0]
        query = fulltext_query(field, words)
        if query is None:
            return []
        where, params = scope_where(scope)
        result = await self._query(
            f"""
            CALL db.idx.fulltext.queryNodes('Memory', $q) YIELD node AS n, score
            {bound} WHERE {where}
            RETURN n.id, score, n.{field} ORDER BY score DESC LIMIT $limit
            """,
            {**params, "q": query, "limit": limit},
        )
        return [TextHit(memory_id, float(score), text or "") for memory_id, score, text in result.result_set]

    async def list_memories(
        self, scope: Scope, order_by: str, limit: int, offset: int = 0, *, with_archived: bool = False
    ) -> list[Memory]:
        """Memories within the scope in a fixed order (importance: importance
        desc, timestamp desc, id asc; or a recall sort), paged. with_archived
        lists archived ones too (by-tag's flagged listing: delete-by-tag
        removes them as well)."""
        where, params = scope_where(scope, with_archived=with_archived)
        result = await self._query(
            f"MATCH (n:Memory) WHERE {where} RETURN {_RETURN_FIELDS} "
            f"ORDER BY {_ORDERS[order_by]} SKIP $offset LIMIT $limit",
            {**params, "offset": offset, "limit": limit},
        )
        return [_read_row(row) for row in result.result_set]

    async def read_candidates(self, tenant: str, ids: list[str]) -> dict[str, tuple[Memory, list[Successor]]]:
        """Records (without embeddings) and their outgoing supersession edges.

        Only a record with superseded_at set can have such an edge (every path
        that creates one sets it; ensure_schema backfills older data), so the
        edges are read for those alone: usually none, and one query instead
        of an OPTIONAL MATCH and a collect over every record, a third of the
        time at 100k memories."""
        if not ids:
            return {}
        result = await self._query(
            f"UNWIND $ids AS id MATCH (n:Memory {{id: id}}) WHERE n.tenant = $tenant RETURN {_RETURN_FIELDS}",
            {"tenant": tenant, "ids": ids},
        )
        memories = [_read_row(values) for values in result.result_set]
        superseded = [m.id for m in memories if m.superseded_at is not None]
        edges = await self.successors(tenant, superseded) if superseded else {}
        return {m.id: (m, edges.get(m.id, [])) for m in memories}

    async def successors(self, tenant: str, ids: list[str]) -> dict[str, list[Successor]]:
        """Outgoing supersession edges of each id (an empty list when none)."""
        result = await self._query(
            """
            UNWIND $ids AS id
            MATCH (n:Memory {id: id})-[s:INVALIDATED_BY|EVOLVED_INTO]->(h:Memory)
            WHERE n.tenant = $tenant AND h.tenant = $tenant
            RETURN n.id, h.id, type(s), s.created_at
            """,
            {"tenant": tenant, "ids": ids},
        )
        found: dict[str, list[Successor]] = {i: [] for i in ids}
        for source, target, kind, at in result.result_set:
            found[source].append(Successor(target, kind, from_micros(at)))
        return found

    async def relations_of(self, tenant: str, ids: list[str], limit: int) -> dict[str, list[Relation]]:
        """The strongest `limit` relations of each memory, both directions."""
        if not ids or limit <= 0:
            return {i: [] for i in ids}
        result = await self._query(
            """
            UNWIND $ids AS id
            MATCH (n:Memory {id: id}) WHERE n.tenant = $tenant
            CALL {
                WITH n
                MATCH (n)-[e]-(o:Memory) WHERE o.tenant = $tenant
                RETURN e, o ORDER BY e.strength DESC LIMIT $limit
            }
            RETURN n.id, type(e), startNode(e) = n, o.id, properties(e)
            """,
            {"tenant": tenant, "ids": ids, "limit": limit},
        )
        found: dict[str, list[Relation]] = {i: [] for i in ids}
        for memory_id, kind, outgoing, other, props in result.result_set:
            found[memory_id].append(_edge_relation(memory_id, kind, outgoing, other, props))
        return found

    async def neighbours(
        self,
        tenant: str,
        ids: list[str],
        *,
        types: list[str] | None,
        per_memory: int,
        min_strength: float,
        min_importance: float,
    ) -> list[tuple[Relation, Memory]]:
        """Memories one edge away from each id (strongest first, per id), with
        the edge as seen from that id."""
        type_filter = "AND type(e) IN $types" if types else ""
        result = await self._query(
            f"""
            UNWIND $ids AS id
            MATCH (a:Memory {{id: id}}) WHERE a.tenant = $tenant
            CALL {{
                WITH a
                MATCH (a)-[e]-(n:Memory)
                WHERE n.tenant = $tenant AND coalesce(e.strength, 0.0) >= $min_strength
                  AND n.importance >= $min_importance {type_filter}
                RETURN e, n ORDER BY e.strength DESC LIMIT $per
            }}
            RETURN a.id, type(e), startNode(e) = a, properties(e), {_RETURN_FIELDS}
            """,
            {
                "tenant": tenant,
                "ids": ids,
                "types": types or [],
                "per": per_memory,
                "min_strength": min_strength,
                "min_importance": min_importance,
            },
        )
        found = []
        for source, kind, outgoing, props, *values in result.result_set:
            other = _read_row(values)
            found.append((_edge_relation(source, kind, outgoing, other.id, props), other))
        return found

    async def entity_neighbours(
        self,
        tenant: str,
        ids: list[str],
        limit: int,
        *,
        per_seed: int | None = None,
        max_mentions: int | None = None,
        max_reads: int | None = None,
    ) -> list[tuple[str, int]]:
        """Other memories mentioning the same entities as these, by shared
        entities, within the bounds (EntityBounds; each None: the store's):
        each seed's rarest entities, none held by more than max_mentions
        memories, at most max_reads mentions read."""
        bounds = self._entity_bounds
        most = bounds.max_mentions if max_mentions is None else max_mentions
        # An entity's mentions are counted only up to most + 1 (a LIMIT in a
        # subquery stops the count): indegree() walks every edge, and at 100k
        # memories the ten seeds' entities took 9 ms to count in full, 1.5 ms so.
        result = await self._query(
            """
            UNWIND $ids AS id
            MATCH (a:Memory {id: id})-[:MENTIONS]->(e:Entity)
            WHERE a.tenant = $tenant
            CALL { WITH e MATCH (e)<-[:MENTIONS]-(x) WITH x LIMIT $over RETURN count(x) AS mentions }
            WITH a, e, mentions WHERE mentions > 1 AND mentions < $over
            WITH a, e ORDER BY mentions, e.tag
            WITH a, collect(e)[0..$per_seed] AS rarest
            UNWIND rarest AS e
            WITH DISTINCT e
            MATCH (e)<-[:MENTIONS]-(b:Memory)
            WHERE b.tenant = $tenant AND NOT b.id IN $ids
            WITH e, b LIMIT $max_reads
            RETURN b.id, count(DISTINCT e) AS shared ORDER BY shared DESC, b.id LIMIT $limit
            """,
            {
                "tenant": tenant,
                "ids": ids,
                "limit": limit,
                "per_seed": bounds.per_seed if per_seed is None else per_seed,
                "over": most + 1,
                "max_reads": bounds.max_reads if max_reads is None else max_reads,
            },
        )
        return [(memory_id, int(shared)) for memory_id, shared in result.result_set]

    async def scan_memories(self, cursor: int, limit: int, tenant: str | None = None) -> tuple[int, list[Memory]]:
        """A page of the tenant's (None: every tenant's) memories, embeddings
        included, after the internal node id `cursor` (-1 to start); returns
        the next cursor. The id range is a seek, so each page costs its own
        size (and the other tenants' nodes in its range), not the graph's."""
        of = "" if tenant is None else " {tenant: $tenant}"  # two plans: every tenant's scan stays a plain id seek
        result = await self._query(
            f"MATCH (m:Memory{of}) WHERE ID(m) > $after WITH m ORDER BY ID(m) LIMIT $limit RETURN ID(m), properties(m)",
            {"after": cursor, "limit": limit, "tenant": tenant},
        )
        if not result.result_set:
            return cursor, []
        return int(result.result_set[-1][0]), [row_to_memory(dict(row[1])) for row in result.result_set]

    # Graph views, analysis and exports ---------------------------------------------------------------

    async def graph_stats(self, tenant: str) -> GraphStats:
        """Memories by type and memory-to-memory edges by type, for one tenant."""
        memories, edges = await asyncio.gather(
            self._query(
                "MATCH (m:Memory) WHERE m.tenant = $tenant RETURN coalesce(m.type, ''), count(m)", {"tenant": tenant}
            ),
            self._query(
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
        result = await self._query(
            f"""
            UNWIND $ids AS id
            MATCH (a:Memory {{id: id}})-[e]-(n:Memory)
            WHERE a.tenant = $tenant AND n.tenant = $tenant AND NOT n.id IN $exclude
            WITH n, max(coalesce(e.strength, 0.0)) AS strength
            RETURN strength, {_RETURN_FIELDS}
            ORDER BY strength DESC, n.importance DESC, n.id ASC LIMIT $limit
            """,
            {"tenant": tenant, "ids": ids, "exclude": exclude, "limit": limit},
        )
        return [(_read_row(values), float(strength)) for strength, *values in result.result_set]

    async def edges_among(self, tenant: str, ids: list[str], limit: int) -> list[Relation]:
        """The edges whose two ends are among `ids`, strongest first."""
        if not ids or limit <= 0:
            return []
        result = await self._query(
            """
            UNWIND $ids AS id
            MATCH (a:Memory {id: id})-[e]->(b:Memory)
            WHERE a.tenant = $tenant AND b.tenant = $tenant AND b.id IN $ids
            RETURN a.id, type(e), b.id, properties(e)
            ORDER BY coalesce(e.strength, 0.0) DESC, a.id, type(e), b.id LIMIT $limit
            """,
            {"tenant": tenant, "ids": ids, "limit": limit},
        )
        return [_edge_relation(source, kind, True, target, props) for source, kind, target, props in result.result_set]

    async def analysis_figures(self, tenant: str, *, now_us: int, top: int, max_hops: int = 5) -> AnalysisFigures:
        """The counts behind GET /analyze, over every memory of the tenant;
        `max_hops` bounds the supersession chains walked (as the state pass's)."""
        params = {"tenant": tenant, "now": now_us, "top": top}
        # Cypher takes no parameter as a path bound: the int is formatted in.
        summary_query = _ANALYSIS_SUMMARY.replace("{hops}", str(max(1, int(max_hops))))
        summary, types, days, hours, tags, entities, patterns, preferences = await asyncio.gather(
            self._query(summary_query, params),
            self._query(
                """
                MATCH (m:Memory) WHERE m.tenant = $tenant
                RETURN coalesce(m.type, ''), count(m), avg(m.confidence), avg(m.importance)
                """,
                params,
            ),
            self._query(
                """
                MATCH (m:Memory) WHERE m.tenant = $tenant
                RETURN toInteger(floor(m.timestamp / 86400000000.0)) AS day, count(m)
                """,
                params,
            ),
            self._query(
                """
                MATCH (m:Memory) WHERE m.tenant = $tenant
                WITH toInteger(floor(m.timestamp / 3600000000.0)) AS h, m
                RETURN ((h % 24) + 24) % 24 AS hour, count(m), avg(m.importance)
                """,
                params,
            ),
            self._query(
                """
                MATCH (m:Memory) WHERE m.tenant = $tenant
                UNWIND m.tags AS tag
                WITH toLower(trim(tag)) AS t WHERE t <> '' AND NOT t STARTS WITH 'entity:'
                RETURN t, count(*) AS n ORDER BY n DESC, t LIMIT $top
                """,
                params,
            ),
            self._query(
                """
                MATCH (m:Memory) WHERE m.tenant = $tenant
                UNWIND m.tags AS tag
                WITH toLower(trim(tag)) AS t WHERE t STARTS WITH 'entity:'
                RETURN t, count(*) AS n ORDER BY n DESC, t LIMIT $top
                """,
                params,
            ),
            self._query(
                """
                MATCH (p:Pattern) WHERE p.tenant = $tenant
                RETURN p.type, p.entity_tag, p.members ORDER BY p.members DESC, p.key LIMIT 10
                """,
                params,
            ),
            self._query(
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

    async def memory_ids(self, tenant: str, after_id: str, limit: int) -> list[str]:
        """A page of the tenant's memory ids, in id order after `after_id`."""
        result = await self._query(
            "MATCH (m:Memory) WHERE m.tenant = $tenant AND m.id > $after RETURN m.id ORDER BY m.id LIMIT $limit",
            {"tenant": tenant, "after": after_id, "limit": limit},
        )
        return [row[0] for row in result.result_set]

    async def export_page(self, tenant: str, after_id: str, limit: int) -> tuple[list[Memory], list[ExportedEdge]]:
        """A page of the tenant's memories (every field, embedding included) in
        id order after `after_id`, with every edge leaving them (to memories,
        entities and patterns of the tenant)."""
        result = await self._query(
            """
            MATCH (m:Memory) WHERE m.tenant = $tenant AND m.id > $after
            WITH m ORDER BY m.id LIMIT $limit
            RETURN properties(m)
            """,
            {"tenant": tenant, "after": after_id, "limit": limit},
        )
        memories = [row_to_memory(dict(row[0])) for row in result.result_set]
        if not memories:
            return [], []
        edges = await self._query(
            """
            UNWIND $ids AS id
            MATCH (a:Memory {id: id})-[e]->(b) WHERE a.tenant = $tenant AND b.tenant = $tenant
            RETURN a.id, type(e), labels(b)[0], coalesce(b.id, b.tag, b.key), properties(e)
            ORDER BY a.id, type(e), labels(b)[0], coalesce(b.id, b.tag, b.key)
            """,
            {"tenant": tenant, "ids": [m.id for m in memories]},
        )
        exported = []
        for source, kind, label, key, props in edges.result_set:
            props = dict(props)
            strength = props.pop("strength", None)
            created = from_micros(props.pop("created_at", None))
            exported.append(ExportedEdge(source, kind, label, key, strength, created, props))
        return memories, exported

    async def export_nodes(self, tenant: str, label: str) -> list[dict[str, Any]]:
        """The properties of the tenant's nodes of one label besides Memory
        (Entity, Pattern), times as stored (epoch microseconds)."""
        if label not in _EXPORTED_LABELS:
            raise ValueError(f"label {label!r} is not exported")
        result = await self._query(
            f"MATCH (n:{label}) WHERE n.tenant = $tenant RETURN properties(n) ORDER BY coalesce(n.tag, n.key)",
            {"tenant": tenant},
        )
        return [dict(row[0]) for row in result.result_set]

    async def touch_memory(self, tenant: str, memory_id: str, last_accessed_us: int) -> None:
        await self.touch_memories(tenant, [memory_id], last_accessed_us)

    async def touch_memories(self, tenant: str, ids: list[str], accessed_us: int) -> None:
        """Record an access of the tenant's memories in one query: only
        last_accessed moves (never updated_at or version, and no event: an
        access is no change to project or enrich), and never backwards."""
        if not ids:
            return
        await self._query(
            """
            UNWIND $ids AS id
            MATCH (m:Memory {id: id}) WHERE m.tenant = $tenant
              AND (m.last_accessed IS NULL OR m.last_accessed < $at)
            SET m.last_accessed = $at
            """,
            {"ids": ids, "tenant": tenant, "at": accessed_us},
        )

    async def count_memories(self, tenant: str | None = None) -> int:
        if tenant is None:
            result = await self._query("MATCH (m:Memory) RETURN count(m)")
        else:
            result = await self._query("MATCH (m:Memory) WHERE m.tenant = $tenant RETURN count(m)", {"tenant": tenant})
        return int(result.result_set[0][0])

    async def status(self) -> ComponentStatus:
        try:
            count = await self.count_memories()
        except Exception as exc:  # a health probe reports, never raises
            return ComponentStatus("falkordb", "unavailable", str(exc))
        return ComponentStatus("falkordb", "connected", self._where, {"memories": float(count)})

    async def close(self) -> None:
        if self._db is not None:
            await self._db.aclose()
            self._db = self._graph = None

    # Embedding stage (enrich's first stage) -----------------------------------------------------------

    async def record_embeddings(
        self,
        tenant: str,
        items: list[tuple[Memory, list[float] | None, str]],
        events: list[MemoryEvent],
        *,
        now_us: int,
    ) -> list[str]:
        """Per (memory as read, vector or None, model name): write the vector
        and its model (version bumped, so a PATCH that read the memory before
        retries instead of clearing the vector), or with None only record the
        event. Written only where version and content are still the ones read,
        so a concurrent content change never gets the old text's vector.
        Returns the ids written."""
        rows = []
        for (memory, vector, model), event in zip(items, events, strict=True):
            owned = {} if vector is None else {
                "embedding": encode_embedding(vector), "embedding_model": model, "version": memory.version + 1,
            }  # fmt: skip
            rows.append(
                {
                    "id": memory.id,
                    "version": memory.version,
                    "content": memory.content,
                    "row": owned,
                    "outbox": outbox_row(event, now_us),
                }
            )
        result = await self._query(
            """
            UNWIND $items AS it
            MATCH (m:Memory {id: it.id})
            WHERE m.tenant = $tenant AND m.version = it.version AND m.content = it.content
            SET m += it.row
            CREATE (x:Outbox) SET x = it.outbox
            RETURN it.id
            """,
            {"tenant": tenant, "items": rows},
        )
        return [row[0] for row in result.result_set]

    async def embedding_models(self, tenant: str, memory_ids: list[str]) -> dict[str, str]:
        """The model the embedding stage recorded for each memory's vector (none: client-supplied or older)."""
        result = await self._query(
            """
            UNWIND $ids AS id MATCH (m:Memory {id: id})
            WHERE m.tenant = $tenant AND m.embedding_model IS NOT NULL
            RETURN m.id, m.embedding_model
            """,
            {"ids": memory_ids, "tenant": tenant},
        )
        return {memory_id: model for memory_id, model in result.result_set}

    async def count_unembedded(self, tenant: str) -> int:
        result = await self._query(
            "MATCH (m:Memory {tenant: $tenant}) WHERE m.embedding IS NULL RETURN count(m)", {"tenant": tenant}
        )
        return int(result.result_set[0][0])

    async def find_unembedded(self, changed_before_us: int, limit: int) -> list[tuple[str, str]]:
        """(tenant, id) of memories without a vector, last changed before the time, oldest first."""
        result = await self._query(
            """
            MATCH (m:Memory) WHERE m.embedding IS NULL AND coalesce(m.updated_at, m.recorded_at) < $before
            RETURN m.tenant, m.id ORDER BY coalesce(m.updated_at, m.recorded_at) LIMIT $limit
            """,
            {"before": changed_before_us, "limit": limit},
        )
        return [(tenant, memory_id) for tenant, memory_id in result.result_set]
