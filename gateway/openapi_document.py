"""The OpenAPI description (/openapi.json), completed once: the component
schemas, the error envelope on every operation and the token an operation
needs (by its route's role)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute, iter_route_contexts

from gateway.openapi import ref
from gateway.openapi_schemas import SCHEMAS, SECURITY_SCHEMES

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
