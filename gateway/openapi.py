"""The OpenAPI description's building blocks for the routes: schemas, query
parameters and `doc(...)`.

The routes read their JSON bodies and query strings themselves (to answer
in the envelope and to keep AutoMem's leniencies, such as `limit=abc`
meaning the default), so FastAPI cannot infer them: each route passes
`**doc(...)` to its decorator, and openapi_document.install completes every
operation (the shared component schemas: openapi_schemas.py)."""

from __future__ import annotations

from typing import Any

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
