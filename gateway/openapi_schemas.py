"""The OpenAPI description's component schemas (#/components/schemas): a
memory, a draft, a recall result, the error envelope and the others the
routes refer to with ref(), and the ways to present a token."""

from __future__ import annotations

from gateway.openapi import (
    BOOLEAN,
    INTEGER,
    NUMBER,
    OBJECT,
    STRING,
    STRINGS,
    TIME,
    UNIT,
    Schema,
    array,
    nullable,
    obj,
    ref,
)
from services.core.domain.trust import ALL_STATES

MEMORY_TIMES = (
    "timestamp",
    "t_valid",
    "t_invalid",
    "updated_at",
    "last_accessed",
    "recorded_at",
    "enriched_at",
    "superseded_at",
    "archived_at",
)

_TAGS_IN = {
    "anyOf": [STRINGS, STRING],
    "description": "A list of tags, or one string stored as one tag; ':' or '/' make a hierarchy.",
}
_EMBEDDING_IN = {
    "anyOf": [array(NUMBER), STRING],
    "description": "A vector of the index's dimension (or its numbers comma-separated); omitted: generated.",
}
_DRAFT_PROPERTIES: dict[str, Schema] = {
    "content": {"type": "string", "minLength": 1, "description": "The memory (at most 2000 characters by default)."},
    "type": {
        "type": "string",
        "description": "Decision, Pattern, Preference, Style, Habit, Insight or Context; omitted: classified.",
    },
    "confidence": {**UNIT, "description": "Confidence in the type (kept only with a type)."},
    "importance": UNIT,
    "tags": _TAGS_IN,
    "metadata": {**OBJECT, "description": "Any JSON object; on PATCH it replaces the stored one."},
    "embedding": _EMBEDDING_IN,
    **{name: {"type": "string", "format": "date-time"} for name in MEMORY_TIMES[:5]},
}

SCHEMAS: dict[str, Schema] = {
    "Error": obj(
        {
            "status": {"const": "error"},
            "code": {"type": "integer", "description": "The HTTP status, repeated."},
            "message": {"type": "string", "description": "What went wrong, naming the field when one is at fault."},
            "reason": {"type": "string", "description": "A stable machine reason, e.g. CONTENT_TOO_LONG."},
            "details": {**OBJECT, "description": "The numbers behind the reason (limit, length...)."},
        },
        ("status", "code", "message"),
        description="The error envelope every failure is answered in.",
    ),
    "MemoryIn": obj(
        {
            **_DRAFT_PROPERTIES,
            "supersedes_memory_id": {**STRING, "description": "Store this as the replacement of that memory."},
            "supersede_relation": {**STRING, "description": "INVALIDATED_BY (default) or EVOLVED_INTO."},
            "supersede_reason": STRING,
            "force": {
                **BOOLEAN,
                "description": "Store the content even if a tombstone holds it (otherwise 409); the event records it.",
            },
        },
        ("content",),
        description="A memory to store; unknown fields (id, format...) are ignored.",
    ),
    "MemoryBatchIn": obj(
        {
            "memories": array(
                obj(
                    {
                        **_DRAFT_PROPERTIES,
                        "idempotency_key": {
                            **STRING,
                            "description": "This item is stored once: sent again (in any batch), its first memory "
                            "answers for it; the same key with another item is a 409.",
                        },
                    },
                    ("content",),
                ),
                minItems=1,
                maxItems=500,
            ),
            "force": {**BOOLEAN, "description": "As for POST /memory: without it one tombstoned item refuses all."},
        },
        ("memories",),
    ),
    "MemoryPatch": obj(
        {
            **_DRAFT_PROPERTIES,
            "archived": {
                **BOOLEAN,
                "description": "true archives the memory (withheld by every read but history); false restores it.",
            },
            "trust_state": {
                "enum": ["deprecated", "active"],
                "description": "deprecated withholds the memory from recall (unless asked for); active undoes it.",
            },
        },
        description="Only the fields sent change; metadata is replaced whole.",
    ),
    "Memory": obj(
        {
            "id": STRING,
            "content": STRING,
            "type": STRING,
            "confidence": NUMBER,
            "importance": NUMBER,
            "tags": STRINGS,
            "tag_prefixes": STRINGS,
            "metadata": OBJECT,
            "factuality": {
                **nullable(OBJECT),
                "description": "Enrichment's assessment {label: FACT|UNVERIFIED|FICTION, confidence, rationale}; "
                "null until enriched.",
            },
            "summary": nullable(STRING),
            "archived": BOOLEAN,
            "relevance_score": nullable(NUMBER),
            "tenant": STRING,
            "version": INTEGER,
            "trust_state": {
                "enum": list(ALL_STATES),
                "description": "How far it may be relied on (docs/trust.md).",
            },
            "review_rule": {**STRING, "description": "The review rule that held it back, when one did."},
            **{name: TIME for name in MEMORY_TIMES},
            "embedding": {**nullable(array(NUMBER)), "description": "Only on GET /memory/{id}."},
            "state_replaces": {**STRING, "description": "The superseded memory this head stands for."},
        },
        ("id", "content", "type", "confidence", "importance", "tags", "metadata", "timestamp"),
    ),
    "Relation": obj(
        {
            "memory_id": STRING,
            "type": STRING,
            "direction": {"enum": ["outgoing", "incoming"]},
            "strength": NUMBER,
            "properties": OBJECT,
            "created_at": TIME,
        },
        ("memory_id", "type", "direction", "strength"),
    ),
    "MemoryRead": {
        "allOf": [
            ref("Memory"),
            obj(
                {
                    "relations": array(ref("Relation")),
                    "state": {**STRING, "description": "current, superseded, expired, ..."},
                    "replaced_by": STRING,
                },
                ("relations", "state"),
            ),
        ]
    },
    "RecallResult": obj(
        {
            "id": STRING,
            "memory": ref("Memory"),
            "match_type": STRING,
            "match_score": NUMBER,
            "final_score": NUMBER,
            "score": NUMBER,
            "score_components": {"type": "object", "additionalProperties": NUMBER},
            "relations": array(ref("Relation")),
            "state_replaces": {**STRING, "description": "Only on a head standing in for this superseded memory."},
            "deduped_from": STRINGS,
            "trust_state": {"enum": list(ALL_STATES), "description": "The memory's trust state (docs/trust.md)."},
            "outside_tag_scope": {**BOOLEAN, "description": "Only on scope_fallback's fills (true)."},
            "expanded_from_entity": {**STRING, "description": "Entity expansion: the entity shared."},
            "related_to": {
                **array(obj({"type": STRING, "strength": NUMBER, "from": STRING}, ("type", "strength", "from"))),
                "description": "Relation expansion: the edges from ranked results that brought it.",
            },
            "relation_score": {**NUMBER, "description": "Expansion: the strength that brought it."},
        },
        ("id", "memory", "match_type", "match_score", "final_score", "score_components", "relations", "deduped_from"),
        description="Fields without a value are left out, as AutoMem leaves them out.",
    ),
    "Association": obj(
        {
            "memory1_id": STRING,
            "memory2_id": STRING,
            "relation_type": STRING,
            "strength": NUMBER,
            "properties": OBJECT,
        },
        ("memory1_id", "memory2_id", "relation_type", "strength"),
    ),
    "AssociationIn": obj(
        {
            "memory1_id": STRING,
            "memory2_id": STRING,
            "type": {
                **STRING,
                "description": "An authorable relation type (GET /graph/relations), any case; default RELATES_TO.",
            },
            "strength": {**UNIT, "description": "Default 0.5."},
        },
        ("memory1_id", "memory2_id"),
        description="Other keys are the type's properties (reason, context, ...).",
    ),
    "AssociationBatchResult": obj(
        {
            "status": {"enum": ["success", "partial_success", "error"]},
            "created_count": INTEGER,
            "failed_count": INTEGER,
            "succeeded": array(ref("Association")),
            "failed": array(obj({"index": INTEGER, "reason": STRING}, ("index", "reason"))),
        },
        ("status", "created_count", "failed_count", "succeeded", "failed"),
    ),
    "GraphNode": {
        "allOf": [
            ref("Memory"),
            obj({"state": STRING, "replaced_by": nullable(STRING)}, ("state", "replaced_by")),
        ]
    },
    "PatternNode": obj(
        {"id": STRING, "kind": {"const": "meta_pattern"}, "summary": STRING, "size": INTEGER},
        ("id", "kind", "summary", "size"),
        description="A MetaPattern (consolidation's cluster of similar memories), never a memory.",
    ),
    "GraphEdge": obj(
        {
            "id": STRING,
            "source": STRING,
            "target": STRING,
            "type": STRING,
            "strength": NUMBER,
            "properties": OBJECT,
            "created_at": TIME,
        },
        ("id", "source", "target", "type", "strength"),
    ),
}

#: The three ways to present a token (docs/api.md), and the admin header that
#: the single AUTOMEM_API_TOKEN needs on admin routes.
SECURITY_SCHEMES: dict[str, Schema] = {
    "bearer": {"type": "http", "scheme": "bearer", "description": "Authorization: Bearer <token> (recommended)."},
    "apiKeyHeader": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
    "apiKeyQuery": {"type": "apiKey", "in": "query", "name": "api_key"},
    "adminToken": {
        "type": "apiKey",
        "in": "header",
        "name": "X-Admin-Token",
        "description": "ADMIN_API_TOKEN, which admin routes need with the single AUTOMEM_API_TOKEN "
        "(not with a tokens file admin); X-Admin-Api-Key or ?admin_token= also carry it, as in AutoMem.",
    },
}
