"""/mcp driven by the official MCP SDK's own client over streamable HTTP,
against the whole stack: every tool listed with its schemas, every answer
checked against its tool's output schema, the write and review flows, roles
and tenants exactly as on REST (docs/mcp.md)."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import httpx
import httpx2
import jsonschema
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.test_auth_roles import entry, write_tokens

pytestmark = pytest.mark.e2e

READ, WRITE, REVIEW, OTHER = "mcp-alpha-read", "mcp-alpha-write", "mcp-alpha-review", "mcp-beta-write"
TOOLS = {
    "store",
    "recall",
    "get",
    "update",
    "delete",
    "associate",
    "history",
    "review_list",
    "review_approve",
    "review_reject",
    "set_trust_state",
    "health",
}


@pytest.fixture
def stack_settings(settings, tmp_path):
    path = tmp_path / "tokens.json"
    tokens = [(READ, "alpha", "read"), (WRITE, "alpha", "write"), (REVIEW, "alpha", "review"), (OTHER, "beta", "write")]
    write_tokens(path, [entry(token, tenant, role) for token, tenant, role in tokens])
    return settings.override(
        {
            "enrichment_enabled": False,
            "memgrid_tokens_file": path,
            # A low-confidence Decision waits for review, so there is something to approve.
            "review_low_confidence_types": ["Decision"],
        }
    )


@asynccontextmanager
async def mcp(gateway_url: str, token: str):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    async with http, Client(streamable_http_client(f"{gateway_url}/mcp", http_client=http)) as client:
        yield Session(client, {tool.name: tool for tool in (await client.list_tools()).tools})


class Session:
    """A client whose every successful answer is checked against the tool's output schema here too."""

    def __init__(self, client: Client, tools: dict):
        self.client = client
        self.tools = tools

    async def call(self, name: str, **arguments):
        result = await self.client.call_tool(name, arguments)
        if not result.is_error:
            jsonschema.validate(result.structured_content, self.tools[name].output_schema)
        return result

    async def ok(self, name: str, **arguments) -> dict:
        result = await self.call(name, **arguments)
        assert not result.is_error, result.content[0].text
        return result.structured_content

    async def refused(self, name: str, reason: str, **arguments) -> str:
        result = await self.call(name, **arguments)
        assert result.is_error, result.structured_content
        text = result.content[0].text
        assert text.startswith(reason), text
        assert "Traceback" not in text
        return text


def unique(text: str) -> str:
    return f"{text} {uuid.uuid4().hex[:8]}"


async def test_tools_are_listed_with_schemas_a_strict_host_accepts(gateway_url):
    async with mcp(gateway_url, READ) as session:
        assert set(session.tools) == TOOLS
        for tool in session.tools.values():
            assert tool.description and len(tool.description) > 60
            for schema in (tool.input_schema, tool.output_schema):
                assert schema["type"] == "object"
                jsonschema.Draft202012Validator.check_schema(schema)
        recall = session.tools["recall"].input_schema["properties"]
        assert {"query", "as_of", "state_mode", "trust_states", "tags", "time_query"} <= set(recall)
        assert "q" not in recall  # aliases are for HTTP clients; a model gets one name
        store = session.tools["store"].input_schema
        assert store["required"] == ["content"]
        assert {"supersedes_memory_id", "t_valid", "t_invalid", "idempotency_key"} <= set(store["properties"])
        assert "state_mode" in session.tools["get"].input_schema["properties"]
        assert "reason" in session.tools["delete"].input_schema["properties"]

        resources = (await session.client.list_resources()).resources
        assert [str(r.uri) for r in resources] == ["memgrid://startup-recall"]
        prompts = (await session.client.list_prompts()).prompts
        assert [p.name for p in prompts] == ["record_decision"]
        prompt = await session.client.get_prompt("record_decision", {"decision": "Use Postgres"})
        assert "supersedes_memory_id" in prompt.messages[0].content.text


async def test_store_recall_supersede_history_and_the_rest(gateway_url):
    topic = uuid.uuid4().hex[:8]
    async with mcp(gateway_url, WRITE) as session:
        stored = {
            "content": f"We deploy {topic} with Ansible",
            "type": "Decision",
            "confidence": 0.9,
            "tags": ["deploy", topic],
            "idempotency_key": f"first-{topic}",
        }
        first = await session.ok("store", **stored)
        assert (await session.ok("store", **stored))["memory_id"] == first["memory_id"]  # a retry, answered once
        old = first["memory_id"]
        await asyncio.sleep(0.05)
        between = datetime.now(UTC).isoformat()
        await asyncio.sleep(0.05)

        new = await session.ok(
            "store",
            content=f"We deploy {topic} with Argo CD now",
            type="Decision",
            confidence=0.95,
            tags=["deploy", topic],
            supersedes_memory_id=old,
            supersede_reason="moved to GitOps",
        )
        recalled = await session.ok("recall", query=f"how do we deploy {topic}", tags=[topic])
        assert [r["memory"]["id"] for r in recalled["results"]] == [new["memory_id"]]
        before = await session.ok("recall", query=f"deploy {topic}", tags=[topic], as_of=between)
        assert old in {r["memory"]["id"] for r in before["results"]}

        read = await session.ok("get", memory_id=old)
        assert read["memory"]["replaced_by"] == new["memory_id"]
        assert (await session.ok("get", memory_id=old, state_mode="history"))["memory"]["id"] == old
        await session.refused("get", "INVALID_STATE_MODE", memory_id=old, state_mode="sometimes")
        kinds = [e["kind"] for e in (await session.ok("history", memory_id=old))["entries"]]
        assert kinds[0] == "created" and "superseded" in kinds

        await session.ok("update", memory_id=new["memory_id"], importance=0.9, tags=["deploy", topic, "gitops"])
        other = await session.ok("store", content=unique("Argo CD syncs every three minutes"), tags=[topic])
        await session.ok("associate", memory1_id=new["memory_id"], memory2_id=other["memory_id"], type="RELATES_TO")
        trust = await session.ok("set_trust_state", memory_id=other["memory_id"], trust_state="deprecated")
        assert trust["memory"]["trust_state"] == "deprecated"
        await session.refused("set_trust_state", "INVALID_TRUST_STATE", memory_id=old, trust_state="verified")
        deleted = await session.ok("delete", memory_id=other["memory_id"], reason="rejected")
        assert deleted["tombstone_id"]
        assert (await session.ok("health"))["status"] in ("healthy", "degraded")

        # Errors are tool errors with the REST reason code; bounds are the REST route's.
        await session.refused("get", "MEMORY_NOT_FOUND", memory_id=str(uuid.uuid4()))
        await session.refused("store", "CONTENT_TOO_LONG", content="x" * 100_000)
        await session.refused("review_list", "PERMISSION_DENIED")  # write is not review
        startup = await session.client.read_resource("memgrid://startup-recall")
        assert '"status": "success"' in startup.contents[0].text


async def test_review_needs_the_review_role(gateway_url):
    async with mcp(gateway_url, WRITE) as writer:
        pending = await writer.ok("store", content=unique("Maybe move to Kafka"), type="Decision", confidence=0.3)
    memory_id = pending["memory_id"]
    async with mcp(gateway_url, READ) as reader:
        await reader.refused("review_approve", "PERMISSION_DENIED", memory_id=memory_id)
        await reader.refused("store", "PERMISSION_DENIED", content=unique("a reader cannot write"))
    async with mcp(gateway_url, REVIEW) as reviewer:
        queue = await reviewer.ok("review_list", limit=200)
        assert memory_id in {m["id"] for m in queue["memories"]}
        approved = await reviewer.ok("review_approve", memory_id=memory_id, note="agreed")
        assert approved["trust_state"] == "verified"
        await reviewer.refused("review_reject", "NOT_PENDING_REVIEW", memory_id=memory_id)
    async with mcp(gateway_url, WRITE) as writer:
        doubtful = await writer.ok("store", content=unique("Maybe drop the cache"), type="Decision", confidence=0.2)
    async with mcp(gateway_url, REVIEW) as reviewer:
        rejected = await reviewer.ok("review_reject", memory_id=doubtful["memory_id"], note="no")
        assert rejected["trust_state"] == "rejected"


async def test_tenants_do_not_meet_through_mcp(gateway_url):
    word = uuid.uuid4().hex[:10]
    async with mcp(gateway_url, OTHER) as beta:
        theirs = (await beta.ok("store", content=f"Beta's secret {word}", tags=[word]))["memory_id"]
    async with mcp(gateway_url, WRITE) as alpha:
        assert (await alpha.ok("recall", query=f"secret {word}", tags=[word]))["results"] == []
        await alpha.refused("get", "MEMORY_NOT_FOUND", memory_id=theirs)
        await alpha.refused("update", "MEMORY_NOT_FOUND", memory_id=theirs, content="changed")
        await alpha.refused("delete", "MEMORY_NOT_FOUND", memory_id=theirs)
        assert (await alpha.ok("history", memory_id=theirs))["entries"] == []
    async with mcp(gateway_url, OTHER) as beta:
        assert (await beta.ok("get", memory_id=theirs))["memory"]["content"] == f"Beta's secret {word}"


async def test_a_bad_or_missing_token_is_refused_before_the_exchange(gateway_url):
    async with httpx.AsyncClient(base_url=gateway_url) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        for headers in ({}, {"Authorization": "Bearer nobody"}):
            reply = await http.post("/mcp", json=body, headers=headers)
            assert reply.status_code == 401 and reply.json()["reason"] == "UNAUTHENTICATED"


async def test_memgrid_mcp_relays_stdio_to_the_endpoint(gateway_url):
    # `python -m cli`, not the console script: the code under test, wherever the venv's script points.
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMGRID_")}
    env.update(MEMGRID_URL=gateway_url, MEMGRID_TOKEN=READ)
    server = StdioServerParameters(command=sys.executable, args=["-m", "cli", "mcp"], env=env)
    async with Client(server) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
        assert (await client.call_tool("health", {})).structured_content["status"] in ("healthy", "degraded")
        refused = await client.call_tool("store", {"content": unique("a reader cannot write")})
        assert refused.is_error and refused.content[0].text.startswith("PERMISSION_DENIED")
