"""The mapping between Memory and FalkorDB node properties, and the Cypher
pieces every reader shares (what a read returns, a Scope as a condition)."""

from __future__ import annotations

import base64
import json
from typing import Any

from services.core.actor import current_actor
from services.core.codec import event_to_pb
from services.core.domain.audit import entry_record
from services.core.domain.embedding_codec import decode_embedding, encode_embedding
from services.core.domain.factuality import lift_factuality
from services.core.domain.model import TIME_FIELDS, Memory, MemoryEvent, Relation
from services.core.domain.recall_request import Scope
from services.core.domain.text_policy import search_meta, search_tags
from services.core.domain.times import from_micros, to_micros
from services.core.domain.trust import ALL_STATES

#: Nullable properties: an update that clears them must remove them.
_NULLABLE = ("embedding", "relevance_score", "t_invalid", "enriched_at", "superseded_at", "archived_at")
#: What a read returns of a node: everything but the embedding and the search copies.
READ_FIELDS = (
    "id", "tenant", "content", "type", "confidence", "importance", "tags", "tag_prefixes", "metadata", "summary",
    "archived", "relevance_score", "version", "factuality", "trust_state", "review_rule", *TIME_FIELDS,
)  # fmt: skip
RETURN_FIELDS = ", ".join(f"n.{name}" for name in READ_FIELDS)
#: The arm each full-text field serves.
ARM_FIELDS = {"keyword": "content", "tag": "search_tags", "metadata": "search_meta"}

#: The orders list_memories offers (importance, or a recall sort).
ORDERS = {
    "importance": "n.importance DESC, n.timestamp DESC, n.id ASC",
    "time_desc": "n.timestamp DESC, n.id ASC",
    "time_asc": "n.timestamp ASC, n.id ASC",
    "updated_desc": "n.updated_at DESC, n.id ASC",
    "updated_asc": "n.updated_at ASC, n.id ASC",
}


#: metadata and factuality as JSON text (json.dumps(value, ensure_ascii=False), its encoder made once).
_TEXT = json.JSONEncoder(ensure_ascii=False)


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
        "metadata": _TEXT.encode(memory.metadata),
        "embedding": encode_embedding(memory.embedding),
        "summary": memory.summary,
        "archived": bool(memory.archived),
        "relevance_score": memory.relevance_score,
        "version": int(memory.version),
        # JSON text, as metadata: FalkorDB refuses map properties.
        "factuality": None if memory.factuality is None else _TEXT.encode(memory.factuality),
        "trust_state": memory.trust_state,
        "review_rule": memory.review_rule,
    }
    for name in TIME_FIELDS:
        row[name] = to_micros(getattr(memory, name))
    row["search_tags"] = search_tags(memory.tags)
    row["search_meta"] = search_meta(memory.metadata)
    return {k: v for k, v in row.items() if v is not None or (keep_nulls and k in _NULLABLE)}


def row_to_memory(row: dict[str, Any]) -> Memory:
    """The inverse of memory_to_row. A record an earlier release enriched
    still holds its factuality in metadata (until ensure_schema moves it):
    it is read as the new shape, so a write never puts it back."""
    # Any: Memory's own fields say which times are required (a stored memory has each of those).
    times: dict[str, Any] = {name: from_micros(row.get(name)) for name in TIME_FIELDS}
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
        # A record written before trust states existed has none: it is active.
        trust_state=row.get("trust_state") or "active",
        review_rule=row.get("review_rule") or "",
        **times,
    )


def outbox_row(
    event: MemoryEvent, created_us: int, *, before: Memory | None = None, after: Memory | None = None
) -> dict[str, Any]:
    """An event waiting in the graph until the bus acknowledges it, with its
    audit entry's content (`audit`, `memory_id`, `kind`: the query's
    AuditTail turns them into an AuditEntry); `before` and `after`, the
    record around the change where the writer holds it, give the entry its
    hashes and diff."""
    payload = base64.b64encode(event_to_pb(event).SerializeToString()).decode("ascii")
    return {
        "id": event.event_id,
        "tenant": event.tenant,
        "payload": payload,
        "created_at": created_us,
        "audit": entry_record(event, current_actor(), before=before, after=after),
        "memory_id": event.memory_id,
        "kind": event.kind.value,
    }


def relation_row(relation: Relation) -> dict[str, Any]:
    return {"strength": relation.strength, "created_at": to_micros(relation.created_at), **relation.properties}


#: Claims an idempotency key for this request (or takes over an expired one);


def edge_relation(memory_id: str, rel_type: str, outgoing: bool, other: str, props) -> Relation:
    """An edge read from one of its ends, as a Relation."""
    props = dict(props)
    strength = float(props.pop("strength", 0.0))
    created_at = from_micros(props.pop("created_at", 0))
    source, target = (memory_id, other) if outgoing else (other, memory_id)
    return Relation(source, target, rel_type, strength, created_at, props)


def read_row(values) -> Memory:
    """A Memory from the values of RETURN_FIELDS, in order."""
    return row_to_memory({k: v for k, v in zip(READ_FIELDS, values, strict=True) if v is not None})


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
    if set(scope.trust_states) != set(ALL_STATES):
        # In every mode, history too: a memory under review or rejected is
        # shown only when asked for. A missing value is active (older records).
        params["trust_states"] = list(scope.trust_states)
        parts.append(f"coalesce({n}.trust_state, 'active') IN $trust_states")
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


def fulltext_query(field: str, words: list[str]) -> str | None:
    """A RediSearch query matching any of the words in one field; the words
    are alphanumeric (domain tokens), so nothing needs escaping."""
    words = [w for w in dict.fromkeys(words) if w.isalnum()]
    if not words:
        return None
    return f"@{field}:({'|'.join(words)})"
