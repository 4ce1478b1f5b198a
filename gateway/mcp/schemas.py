"""A tool's JSON Schemas, read from the gateway's own OpenAPI description.

A tool is one REST operation, so its input is that operation's path, query
and header parameters and JSON body, and its output is the operation's
success answer: deriving both from /openapi.json keeps one description of
each route, and the test that holds the gateway to that description
(tests/e2e/test_fuzz.py) holds the tools' answers to it too."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

Schema = dict[str, Any]

_COMPONENT = "#/components/schemas/"
#: Aliases and legacy spellings are there for HTTP clients written against AutoMem; a model gets one name.
_ALIAS = re.compile(r"^(Alias of|Legacy:)")


@dataclass
class Operation:
    """Where a tool's arguments go: each argument's name is the path, query or
    header parameter it fills, or a field of the JSON body."""

    method: str
    path: str
    path_params: list[str] = field(default_factory=list)
    query_params: list[str] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)  # argument -> header name
    body_fields: list[str] = field(default_factory=list)
    input_schema: Schema = field(default_factory=dict)
    output_schema: Schema = field(default_factory=dict)


def argument_name(header: str) -> str:
    """Idempotency-Key -> idempotency_key."""
    return header.lower().replace("-", "_")


def _rewrite(schema: Any, used: set[str]) -> Any:
    """`schema` with OpenAPI's component refs pointed at $defs, collecting the names."""
    if isinstance(schema, dict):
        out = {}
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str) and value.startswith(_COMPONENT):
                name = value[len(_COMPONENT) :]
                used.add(name)
                out[key] = f"#/$defs/{name}"
            else:
                out[key] = _rewrite(value, used)
        return out
    if isinstance(schema, list):
        return [_rewrite(item, used) for item in schema]
    return schema


def _with_defs(schema: Schema, components: dict[str, Schema]) -> Schema:
    """A self-contained schema: every component it reaches, directly or not, under $defs."""
    used: set[str] = set()
    root = _rewrite(schema, used)
    defs: dict[str, Schema] = {}
    pending = sorted(used)
    while pending:
        name = pending.pop()
        if name in defs:
            continue
        found: set[str] = set()
        defs[name] = _rewrite(components[name], found)
        pending.extend(sorted(found - defs.keys()))
    if defs:
        root["$defs"] = dict(sorted(defs.items()))
    root.setdefault("type", "object")  # hosts want an object at the root; every answer is one
    return root


def _resolve(schema: Schema, components: dict[str, Schema]) -> Schema:
    while "$ref" in schema:
        schema = components[schema["$ref"][len(_COMPONENT) :]]
    return schema


def _described(parameter: dict) -> Schema:
    schema = copy.deepcopy(parameter.get("schema", {}))
    if parameter.get("description") and "description" not in schema:
        schema["description"] = parameter["description"]
    return schema


def operation(
    spec: dict,
    method: str,
    path: str,
    *,
    body: str | None = None,
    only: tuple[str, ...] | None = None,
    omit: tuple[str, ...] = (),
) -> Operation:
    """The REST operation `method path` of the OpenAPI document `spec` as a tool.

    `body` names a component to read the JSON body as (when the route takes
    several shapes); `only` keeps just these arguments (besides the path's),
    `omit` leaves these out."""
    components = spec.get("components", {}).get("schemas", {})
    op = spec["paths"][path][method.lower()]
    found = Operation(method.upper(), path)
    properties: dict[str, Schema] = {}
    required: list[str] = []

    def wanted(name: str) -> bool:
        return name not in omit and (only is None or name in only)

    body_schema: Schema | None = None
    if body is not None:
        body_schema = components[body]
    elif "requestBody" in op:
        body_schema = _resolve(op["requestBody"]["content"]["application/json"]["schema"], components)
    body_names = set((body_schema or {}).get("properties", {}))

    for parameter in op.get("parameters", []):
        name, where = parameter["name"], parameter["in"]
        if where == "path":
            found.path_params.append(name)
            properties[name] = _described(parameter)
            required.append(name)
            continue
        if _ALIAS.match(parameter.get("description", "")):
            continue
        if where == "header":
            name = argument_name(name)
        if not wanted(name) or name in body_names:  # a body field wins over its query twin
            continue
        if where == "header":
            found.headers[name] = parameter["name"]
        elif where == "query":
            found.query_params.append(name)
        else:
            continue
        properties[name] = _described(parameter)
    if body_schema is not None:
        for name, schema in body_schema.get("properties", {}).items():
            if wanted(name) and name not in properties:
                found.body_fields.append(name)
                properties[name] = copy.deepcopy(schema)
        required += [name for name in body_schema.get("required", []) if name in found.body_fields]

    found.input_schema = _with_defs({"type": "object", "properties": properties, "required": required}, components)
    if not found.input_schema["required"]:
        del found.input_schema["required"]
    found.output_schema = _with_defs(copy.deepcopy(_success(op)), components)
    return found


def _success(op: dict) -> Schema:
    """The success answer's schema: the 2xx ones, any of them when several."""
    answers = [
        answer.get("content", {}).get("application/json", {}).get("schema", {"type": "object"})
        for code, answer in sorted(op.get("responses", {}).items())
        if code.startswith("2")
    ]
    if not answers:
        return {"type": "object"}
    return answers[0] if len(answers) == 1 else {"anyOf": answers}
