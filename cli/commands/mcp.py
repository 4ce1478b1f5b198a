"""`memgrid mcp`: the gateway's /mcp for MCP hosts that start a server over
stdio. A relay, not a second server: every list and call is passed to /mcp
with the caller's token and its answer passed back as it came, so the
tools, their schemas and their errors are the gateway's."""

from __future__ import annotations

import anyio
import httpx2
import mcp_types as types
import typer
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from cli.client import Target
from cli.output import session


def relay(remote: Client) -> Server:
    """A stdio-side server whose every request is `remote`'s answer."""

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return await remote.list_tools()

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await remote.call_tool(params.name, params.arguments or {})

    async def list_resources(ctx, params) -> types.ListResourcesResult:
        return await remote.list_resources()

    async def read_resource(ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        return await remote.read_resource(str(params.uri))

    async def list_prompts(ctx, params) -> types.ListPromptsResult:
        return await remote.list_prompts()

    async def get_prompt(ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        return await remote.get_prompt(params.name, params.arguments or {})

    return Server(
        "memgrid",
        title="memgrid",
        instructions=remote.instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


async def serve(target: Target) -> None:
    """Relay stdin/stdout to `target`'s /mcp until the host closes stdin."""
    headers = {"Authorization": f"Bearer {target.token}"} if target.token else {}
    if target.admin_token:
        headers["X-Admin-Token"] = target.admin_token
    http = httpx2.AsyncClient(headers=headers, timeout=target.timeout)
    url = f"{target.url.rstrip('/')}/mcp"
    async with http, Client(streamable_http_client(url, http_client=http)) as remote, stdio_server() as streams:
        server = relay(remote)
        await server.run(streams[0], streams[1], server.create_initialization_options())


def mcp(ctx: typer.Context) -> None:
    """Serve the gateway's MCP tools over stdio, for hosts that start a local server (relays /mcp)."""
    anyio.run(serve, session(ctx).target)
