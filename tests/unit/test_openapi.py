"""/openapi.json describes every route: its query parameters (those the route
reads itself), its JSON body, its answers (the error envelope included) and
how to present a token."""

from __future__ import annotations

import ast
import inspect
import sys

import pytest
from fastapi.routing import APIRoute, iter_route_contexts

from gateway.app import create_app
from services.core.settings import Settings

#: Routes whose every body field is optional (an empty body is fine).
OPTIONAL_BODIES = {
    ("POST", "/admin/reindex"),
    ("POST", "/admin/reembed"),
    ("POST", "/consolidate"),
    ("POST", "/backup"),
    ("POST", "/restore"),  # a JSON name, or the archive itself (application/gzip)
    ("POST", "/review/{memory_id}/approve"),  # an optional note
    ("POST", "/review/{memory_id}/reject"),
}
#: Query parameters read outside a route module (the token, by auth).
NOT_ROUTE_PARAMETERS = {"api_key"}


@pytest.fixture(scope="module")
def app():
    return create_app(Settings(_env_file=None), "unit-token")


@pytest.fixture(scope="module")
def description(app):
    return app.openapi()


def routes(app) -> list[tuple[str, str, APIRoute]]:
    found = []
    for context in iter_route_contexts(app.routes):
        route = context.original_route
        if isinstance(route, APIRoute) and route.include_in_schema:
            found += [(method, context.path_format, route) for method in sorted(route.methods)]
    return found


def operations(description):
    for path, items in description["paths"].items():
        for method, operation in items.items():
            yield method.upper(), path, operation


def test_every_route_is_described(app, description):
    described = {(method, path) for method, path, _ in operations(description)}
    assert {(method, path) for method, path, _ in routes(app)} == described
    assert len(described) >= 28
    ids = [operation["operationId"] for _, _, operation in operations(description)]
    assert len(ids) == len(set(ids))


def test_every_answer_is_documented_and_errors_use_the_envelope(description):
    assert description["components"]["schemas"]["Error"]["required"] == ["status", "code", "message"]
    assert "HTTPValidationError" not in description["components"]["schemas"]
    for method, path, operation in operations(description):
        responses = operation["responses"]
        assert "422" not in responses, (method, path)
        assert any(code.startswith("2") for code in responses), (method, path)
        for code in ("400", "404", "500", "503"):
            if not (path == "/health" and code == "503"):  # health answers its own body when degraded
                assert responses[code]["content"]["application/json"]["schema"] == {
                    "$ref": "#/components/schemas/Error"
                }, (method, path, code)
        success = next(v for code, v in responses.items() if code.startswith("2"))
        schema = next(iter(success["content"].values()))["schema"]
        assert schema, (method, path)  # a real schema, not FastAPI's {} for an untyped dict


def test_auth_is_described_and_health_is_open(description):
    schemes = description["components"]["securitySchemes"]
    assert schemes["bearer"] == {**schemes["bearer"], "type": "http", "scheme": "bearer"}
    assert (schemes["apiKeyHeader"]["in"], schemes["apiKeyHeader"]["name"]) == ("header", "X-API-Key")
    assert (schemes["apiKeyQuery"]["in"], schemes["apiKeyQuery"]["name"]) == ("query", "api_key")
    for method, path, operation in operations(description):
        if path == "/health":
            assert operation["security"] == [] and "401" not in operation["responses"]
            continue
        alternatives = operation["security"]
        assert {"bearer": []} in alternatives and {"apiKeyQuery": []} in alternatives, (method, path)
        assert {"401", "403"} <= set(operation["responses"]), (method, path)
        if operation["x-memgrid-role"] == "admin":
            assert {"bearer": [], "adminToken": []} in alternatives, (method, path)


def test_every_body_the_routes_read_is_described(app, description):
    described = {(method, path): operation for method, path, operation in operations(description)}
    for method, path, route in routes(app):
        source = inspect.getsource(route.endpoint)
        reads = "json_body(" in source or "optional_json_object(" in source or "decode_json(" in source
        body = described[(method, path)].get("requestBody")
        assert bool(body) == reads, (method, path)
        if body:
            assert body["required"] == ((method, path) not in OPTIONAL_BODIES), (method, path)
            assert body["content"]["application/json"]["schema"], (method, path)


def _read_parameters(module) -> set[str]:
    """The query parameter names a route module reads: the string literals
    passed to its query_* helpers (and to _optional_floats, which calls one)."""
    names = set()
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        if node.func.id.startswith("query_") or node.func.id == "_optional_floats":
            for argument in node.args:
                for item in ast.walk(argument):
                    if isinstance(item, ast.Constant) and isinstance(item.value, str):
                        names.add(item.value)
    return names - NOT_ROUTE_PARAMETERS


def test_every_query_parameter_the_routes_read_is_declared_with_a_type(app, description):
    described = {(method, path): operation for method, path, operation in operations(description)}
    declared_by_module: dict[str, set[str]] = {}
    for method, path, route in routes(app):
        parameters = described[(method, path)].get("parameters", [])
        for parameter in parameters:
            schema = parameter["schema"]
            assert {"type", "enum", "anyOf"} & set(schema), (method, path, parameter)
        names = {p["name"] for p in parameters if p["in"] == "query"}
        declared_by_module.setdefault(route.endpoint.__module__, set()).update(names)
    for module_name, declared in declared_by_module.items():
        read = _read_parameters(sys.modules[module_name])
        assert read <= declared, (module_name, read - declared)


def test_the_description_is_served(app):
    assert app.openapi_url == "/openapi.json"
