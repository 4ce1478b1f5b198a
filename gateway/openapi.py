"""The OpenAPI description (/openapi.json): what each route reads and
answers, the error envelope on every operation, and the token schemes.

The routes read their JSON bodies and query strings themselves (to answer
in the envelope and to keep AutoMem's leniencies, such as `limit=abc`
meaning the default), so FastAPI cannot infer them: each route passes
`**doc(...)` to its decorator, and `install` completes every operation."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute, iter_route_contexts

from services.core.domain.trust import ALL_STATES

Schema = dict[str, Any]


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema: Schema) -> Schema:
    return {"anyOf": [schema, {"type": "null"}]}


def obj(properties: dict[str, Schema], required: tuple[str, ...] = (), **extra: Any) -> Schema:
    """An object with these properties; others are allowed (clients must ignore what they do not know)."""
    schema: Schema = {"type": "object", "properties": properties, **extra}
    if required:
        schema["required"] = list(required)
    return schema


def array(items: Schema, **extra: Any) -> Schema:
    return {"type": "array", "items": items, **extra}


STRING: Schema = {"type": "string"}
NUMBER: Schema = {"type": "number"}
INTEGER: Schema = {"type": "integer"}
BOOLEAN: Schema = {"type": "boolean"}
OBJECT: Schema = {"type": "object"}
TIME: Schema = nullable({"type": "string", "format": "date-time"})
UNIT: Schema = {"type": "number", "minimum": 0, "maximum": 1}
COUNTS: Schema = {"type": "object", "additionalProperties": INTEGER}
STRINGS: Schema = array(STRING)

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
_TOKEN_SCHEMES = ("bearer", "apiKeyHeader", "apiKeyQuery")

_ERRORS = {
    "400": "Invalid input: a malformed body, or a field or parameter of the wrong type or value (named).",
    "401": "No API token, or an unknown one.",
    "403": "The token's role may not do this.",
    "404": "No such memory (for this tenant).",
    "409": "A conflict: a concurrent change, an idempotency key reused with another body, or a run already going.",
    "413": "The request body is larger than MAX_REQUEST_BYTES.",
    "415": "A body sent with a Content-Type other than application/json (or application/*+json).",
    "429": "The tenant's memory limit is reached.",
    "500": "A bug.",
    "503": "A backing service is unavailable.",
    "504": "A backing service did not answer in time.",
}


def query(name: str, schema: Schema, description: str = "", *, required: bool = False, explode: bool = True) -> dict:
    """A query parameter; an array one is repeatable (explode) or comma-separated."""
    parameter = {"name": name, "in": "query", "required": required, "schema": schema}
    if description:
        parameter["description"] = description
    if schema.get("type") == "array":
        parameter.update(style="form", explode=explode)
    return parameter


def lenient_int(name: str, description: str, **bounds: int) -> dict:
    """A count whose bad values (not a whole number) mean the default, as AutoMem's clients expect."""
    return query(name, {"type": "integer", **bounds}, f"{description} Not a whole number: the default.")


STATE_MODE = query(
    "state_mode",
    {"enum": ["current", "history"]},
    "current (default): what is superseded or expired is replaced by its head or left out; history: everything.",
)
TAGS = query("tags", STRINGS, "Repeatable; comma-separated values are split too.")
TRUST_STATES = query(
    "trust_states",
    STRINGS,
    "Trust states to show (repeatable or comma-separated; 'all': every one). Default: all but pending_review, "
    "rejected and deprecated.",
)
IDS: Schema = {
    "anyOf": [STRINGS, STRING],
    "description": "Memory ids, as a list or comma-separated; ids not of the caller's tenant are skipped.",
}


def doc(
    *,
    ok: Schema | None = None,
    status: int = 200,
    params: tuple[dict, ...] = (),
    body: Schema | None = None,
    body_required: bool = True,
    responses: dict[int, tuple[str, Schema]] | None = None,
) -> dict:
    """Keyword arguments for a route decorator: the parameters and JSON body
    the route reads, its success answer, and answers besides the envelope."""
    extra: dict[str, Any] = {}
    if params:
        extra["parameters"] = list(params)
    if body is not None:
        extra["requestBody"] = {"required": body_required, "content": {"application/json": {"schema": body}}}
    answers: dict[str, Any] = {}
    if ok is not None:
        answers[str(status)] = {"content": {"application/json": {"schema": ok}}}
    for code, (description, schema) in (responses or {}).items():
        answers[str(code)] = {"description": description, "content": {"application/json": {"schema": schema}}}
    if answers:
        extra["responses"] = answers
    return {"openapi_extra": extra} if extra else {}


def _roles(app: FastAPI) -> dict[tuple[str, str], str]:
    """(path, METHOD) -> the role its require() dependency names."""
    roles = {}
    for context in iter_route_contexts(app.routes):  # as get_openapi walks them, included routers too
        route = context.original_route
        if not isinstance(route, APIRoute):
            continue
        for dependency in route.dependant.dependencies:
            role = getattr(dependency.call, "role", None)
            if role is not None:
                for method in route.methods or ():
                    roles[(context.path_format or route.path_format, method)] = role
    return roles


def _error(description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": ref("Error")}}}


def _complete(operation: dict, role: str | None) -> None:
    responses = operation.setdefault("responses", {})
    responses.pop("422", None)  # FastAPI's validation shape: never answered, the envelope is
    codes = ["400", "404", "500", "503", "504"]
    if role is not None:
        codes += ["401", "403"]
        if role != "read":
            codes += ["409", "429"]
    if "requestBody" in operation:
        codes += ["413", "415"]
    for code in sorted(codes):
        responses.setdefault(code, _error(_ERRORS[code]))
    if role is None:
        operation["security"] = []
        return
    alternatives: list[dict[str, list[str]]] = [{scheme: []} for scheme in _TOKEN_SCHEMES]
    if role == "admin":
        alternatives += [{scheme: [], "adminToken": []} for scheme in _TOKEN_SCHEMES]
    operation["security"] = alternatives
    operation["x-memgrid-role"] = role
    needs = f"Needs a token with the '{role}' role."
    operation["description"] = f"{operation.get('description', '').strip()}\n\n{needs}".strip()


def install(app: FastAPI) -> None:
    """Serve the completed description at /openapi.json (built once)."""

    def build() -> dict:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                description="Long-term memory for AI agents; an AutoMem-compatible REST surface. "
                "Every error is answered as {status: error, code, message}.",
                routes=app.routes,
            )
            components = schema.setdefault("components", {})
            schemas = components.setdefault("schemas", {})
            for unused in ("HTTPValidationError", "ValidationError"):
                schemas.pop(unused, None)
            schemas.update(SCHEMAS)
            components["securitySchemes"] = SECURITY_SCHEMES
            roles = _roles(app)
            for path, operations in schema["paths"].items():
                for method, operation in operations.items():
                    _complete(operation, roles.get((path, method.upper())))
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = build  # type: ignore[method-assign]  # FastAPI's documented way to complete its schema
