"""The MCP tools' schemas, read from the OpenAPI description, and how a REST
answer becomes a tool result (gateway/mcp/); the calls themselves are
driven end to end in tests/e2e/test_mcp_endpoint.py."""

from __future__ import annotations

import httpx
import jsonschema
import pytest

from gateway.app import create_app
from gateway.mcp.dispatch import tool_result
from gateway.mcp.tools import SPECS, build_tools
from services.core.settings import Settings


@pytest.fixture(scope="module")
def tools():
    return build_tools(create_app(Settings(_env_file=None), "unit-token").openapi())


def test_every_tool_has_valid_object_schemas(tools):
    assert list(tools) == [spec.name for spec in SPECS]
    for tool in tools.values():
        listed = tool.listed()
        for schema in (listed.input_schema, listed.output_schema):
            assert schema["type"] == "object"
            jsonschema.Draft202012Validator.check_schema(schema)
            assert "#/components/" not in str(schema)  # refs point into the schema's own $defs


def test_arguments_map_to_the_rest_call(tools):
    store = tools["store"].operation
    assert store.headers == {"idempotency_key": "Idempotency-Key"}
    assert "force" in store.body_fields and "force" not in store.query_params  # the body twin wins
    recall = tools["recall"].operation
    assert "as_of" in recall.query_params and "q" not in recall.query_params and "offset" not in recall.query_params
    assert tools["set_trust_state"].operation.body_fields == ["trust_state"]
    assert tools["get"].operation.input_schema["required"] == ["memory_id"]


def test_an_error_envelope_is_a_tool_error_with_its_reason():
    body = {"status": "error", "code": 404, "message": "memory x not found", "reason": "MEMORY_NOT_FOUND"}
    result = tool_result(httpx.Response(404, json=body))
    assert result.is_error and result.structured_content is None
    assert result.content[0].text.startswith("MEMORY_NOT_FOUND (404): memory x not found")


def test_an_answer_that_is_not_an_envelope_is_a_result_whatever_its_status():
    degraded = {"status": "degraded", "falkordb": "connected", "qdrant": "error"}
    result = tool_result(httpx.Response(503, json=degraded))
    assert not result.is_error and result.structured_content == degraded
    assert tool_result(httpx.Response(502, text="<html>bad gateway</html>")).is_error
