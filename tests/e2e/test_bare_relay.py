"""benchmarks/bare_relay.py, the yardstick the gateway's overhead is read
against, makes the same CreateMemory call the gateway makes: what it stores
the gateway then serves."""

from __future__ import annotations

import importlib
import os

import httpx
import pytest

from tests.conftest import TEST_CLAIM_KEY
from tests.e2e.conftest import serving

pytestmark = pytest.mark.e2e


async def test_the_bare_relay_stores_through_ingest(stack_services, client, monkeypatch):
    # Importing the relay sets GRPC_EXPERIMENTS (for its own process); restored after the test.
    monkeypatch.setenv("GRPC_EXPERIMENTS", os.environ.get("GRPC_EXPERIMENTS", ""))
    relay = importlib.import_module("benchmarks.bare_relay").relay
    app = relay(f"127.0.0.1:{stack_services['ingest'].port}", TEST_CLAIM_KEY.encode())
    async with serving(app) as url, httpx.AsyncClient(base_url=url) as relayed:
        reply = await relayed.post("/memory", json={"content": "relayed to ingest", "type": "Insight"})
    assert reply.status_code == 201
    memory_id = reply.json()["memory_id"]
    stored = await client.get(f"/memory/{memory_id}")
    assert stored.status_code == 200
    assert (stored.json()["memory"]["content"], stored.json()["memory"]["type"]) == ("relayed to ingest", "Insight")
