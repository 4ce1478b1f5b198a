"""/mcp: memgrid for agents over MCP's streamable HTTP transport.

Built on the official SDK's low-level `Server` (mcp.server.lowlevel): the
tools are data (tools.py), their schemas come from the OpenAPI description,
and one handler makes every call through the REST route it stands for
(dispatch.py), which the high-level MCPServer, shaping each tool from a
Python signature, would have us restate.

Stateless and JSON-answered: every POST is a whole exchange, authenticated
by its own token (as a REST call is), and any gateway replica serves it."""

from __future__ import annotations

import contextvars
import json
from contextlib import asynccontextmanager

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from gateway.envelope import ApiError, envelope
from gateway.mcp.dispatch import Dispatcher, answer_of, forwarded_headers, tool_error
from gateway.mcp.prompts import PROMPTS, render_prompt
from gateway.mcp.tools import Tool, build_tools

INSTRUCTIONS = (
    "memgrid is your long-term memory. Recall before you answer or decide; store what should outlast this "
    "session (decisions, preferences, lessons, facts) in short self-contained memories; when something "
    "replaces an older memory, store the new one with supersedes_memory_id rather than editing the old. "
    "Read the memgrid://startup-recall resource at the start of a session."
)
STARTUP_RECALL = "memgrid://startup-recall"

#: The credentials of the MCP request being served, as the REST call presents them.
_credentials: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("mcp_credentials", default=None)


class McpEndpoint:
    """The ASGI endpoint at /mcp of `app` (the gateway's FastAPI app)."""

    def __init__(self, app, version: str):
        self._app = app
        self._tools: dict[str, Tool] | None = None
        self._dispatcher: Dispatcher | None = None
        server = Server(
            "memgrid",
            version=version,
            title="memgrid",
            instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_read_resource=self._read_resource,
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._get_prompt,
        )
        # The SDK's own body bound (4 MiB) would come before the gateway's: MAX_REQUEST_BYTES decides, as on REST.
        self._sessions = StreamableHTTPSessionManager(
            app=server,
            json_response=True,
            stateless=True,
            max_request_body_size=app.state.settings.gateway.max_request_bytes,
        )

    @property
    def tools(self) -> dict[str, Tool]:
        """The tools, built from the app's OpenAPI description on first use."""
        if self._tools is None:
            self._tools = build_tools(self._app.openapi())
        return self._tools

    @asynccontextmanager
    async def running(self):
        """Serve while the gateway runs (its lifespan)."""
        self._dispatcher = Dispatcher(self._app)
        try:
            async with self._sessions.run():
                yield
        finally:
            await self._dispatcher.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The token is checked before the MCP exchange, so a host learns at connect time that it is refused.
        request = Request(scope, receive)
        try:
            self._app.state.auth.authenticate(request)
        except ApiError as exc:
            await envelope(exc.code, exc.message, exc.reason)(scope, receive, send)
            return
        token = _credentials.set(forwarded_headers(request))
        try:
            await self._sessions.handle_request(scope, receive, send)
        finally:
            _credentials.reset(token)

    async def _list_tools(self, ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool.listed() for tool in self.tools.values()])

    async def _call_tool(self, ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = self.tools.get(params.name)
        if tool is None:
            return tool_error(404, f"no tool named {params.name!r}; one of {', '.join(self.tools)}", "UNKNOWN_TOOL")
        assert self._dispatcher is not None  # noqa: S101  narrows the type: set while the app runs
        return await self._dispatcher.call(tool.operation, params.arguments or {}, _credentials.get() or {})

    async def _list_resources(self, ctx, params) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=STARTUP_RECALL,
                    name="startup-recall",
                    title="What to know at the start of a session",
                    description="The tenant's critical lessons, system rules and most important current memories "
                    "(GET /startup-recall): read it once when a session starts.",
                    mime_type="application/json",
                )
            ]
        )

    async def _read_resource(self, ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        if str(params.uri) != STARTUP_RECALL:
            raise MCPError(types.INVALID_PARAMS, f"no resource {params.uri}; {STARTUP_RECALL} is the one")
        assert self._dispatcher is not None  # noqa: S101  narrows the type: set while the app runs
        reply = await self._dispatcher.request("GET", "/startup-recall", _credentials.get() or {})
        answer = answer_of(reply)
        if not isinstance(answer, dict) or answer.get("status") == "error":
            answer = answer if isinstance(answer, dict) else {}
            raise MCPError(
                types.INTERNAL_ERROR,
                f"{answer.get('reason', 'ERROR')} ({reply.status_code}): {answer.get('message', '')}",
                {"reason": answer.get("reason"), "code": reply.status_code},
            )
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(uri=STARTUP_RECALL, mime_type="application/json", text=json.dumps(answer))
            ]
        )

    async def _list_prompts(self, ctx, params) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=list(PROMPTS))

    async def _get_prompt(self, ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        return render_prompt(params.name, params.arguments or {})
