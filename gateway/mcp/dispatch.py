"""A tool call made as the REST call it stands for, in-process.

The call goes through the gateway's own ASGI app with the caller's token,
so authentication, roles, tenant, body limits, validation and the error
envelope are the REST route's own: an MCP tool is never a second
implementation of any rule. The answer comes back as a tool result: the
JSON answer as structured content, an error envelope as a tool error that
keeps the REST reason code (never a stack trace)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import httpx
import mcp_types as types
import structlog
from starlette.requests import Request

from gateway.auth import presented_admin_token, presented_token
from gateway.mcp.schemas import Operation

log = structlog.get_logger()

_BASE = "http://memgrid.mcp"


def forwarded_headers(request: Request | None) -> dict[str, str]:
    """The credentials of the MCP request, as the REST call presents them."""
    if request is None:
        return {}
    headers = {}
    if token := presented_token(request):
        headers["Authorization"] = f"Bearer {token}"
    if admin := presented_admin_token(request):
        headers["X-Admin-Token"] = admin
    return headers


def _query_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return [_query_value(item) for item in value]
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


class Dispatcher:
    """Makes REST calls on the app it is given, in-process (no socket)."""

    def __init__(self, app):
        # raise_app_exceptions=False: a bug answers the app's 500 envelope, as over HTTP.
        self._client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app, raise_app_exceptions=False), base_url=_BASE
        )

    async def close(self) -> None:
        await self._client.aclose()

    async def request(self, method: str, path: str, headers: dict[str, str], **options) -> httpx.Response:
        return await self._client.request(method, path, headers=headers, **options)

    async def call(self, op: Operation, arguments: dict[str, Any], headers: dict[str, str]) -> types.CallToolResult:
        """`op` with these arguments, on behalf of whoever `headers` authenticate."""
        path = op.path
        query: dict[str, Any] = {}
        body: dict[str, Any] = {}
        headers = dict(headers)
        for name, value in arguments.items():
            if value is None:
                continue
            if name in op.path_params:
                path = path.replace("{" + name + "}", quote(str(value), safe=""))
            elif name in op.headers:
                headers[op.headers[name]] = str(value)
            elif name in op.query_params or not op.body_fields:
                query[name] = _query_value(value)
            else:
                body[name] = value  # a body field, or another property the body allows
        missing = [name for name in op.path_params if "{" + name + "}" in path]
        if missing:
            return tool_error(400, f"'{missing[0]}' is required", "FIELD_REQUIRED")
        json_body = body if op.body_fields or body else None
        reply = await self.request(op.method, path, headers, params=query, json=json_body)
        return tool_result(reply)


def answer_of(reply: httpx.Response) -> Any:
    try:
        return reply.json()
    except ValueError:
        return None


def tool_result(reply: httpx.Response) -> types.CallToolResult:
    """A REST answer as a tool result: an error envelope (or anything not a
    JSON object) is a tool error, any other answer (a degraded /health's 503
    too) the structured content."""
    answer = answer_of(reply)
    if not isinstance(answer, dict):
        return tool_error(reply.status_code, "the gateway answered no JSON object", "INTERNAL")
    if answer.get("status") == "error":
        return tool_error(
            answer.get("code", reply.status_code),
            answer.get("message", ""),
            answer.get("reason"),
            answer.get("details"),
        )
    text = json.dumps(answer, ensure_ascii=False, separators=(",", ":"))
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=answer)


def tool_error(code: int, message: str, reason: str | None = None, details: dict | None = None) -> types.CallToolResult:
    """An MCP tool error carrying the REST envelope: code, reason code, message, details."""
    envelope: dict[str, Any] = {"status": "error", "code": code, "reason": reason or "ERROR", "message": message}
    if details:
        envelope["details"] = details
    text = f"{envelope['reason']} ({code}): {message}\n{json.dumps(envelope, ensure_ascii=False)}"
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
