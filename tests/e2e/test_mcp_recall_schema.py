"""GET /recall against the fields AutoMem's MCP client reads (mcp_recall_schema.json,
from its recall tool's output schema): every kind of answer keeps each field
its declared type or leaves it out, so a strict MCP host accepts the
client's detailed and json formats."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema_rs
import pytest

from tests.e2e.test_recall_routes import associate, entity_tagged, indexed, store, supersede

pytestmark = pytest.mark.e2e

SCHEMA = json.loads((Path(__file__).with_name("mcp_recall_schema.json")).read_text())
VALIDATOR = jsonschema_rs.validator_for(SCHEMA)


@pytest.fixture
def stack_settings(settings):
    return settings.override({"enrichment_enabled": True})


def problems(body: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.instance_path))}: {e.message}" for e in VALIDATOR.iter_errors(body)]


def test_the_schema_rejects_what_a_strict_host_rejects():
    result = {"id": "a", "memory": {"content": "x"}, "state_replaces": None}
    assert problems({"results": [result], "count": 1}) == ['results/0/state_replaces: null is not of type "string"']
    assert problems({"results": [], "count": 0, "expansion": {"enabled": True}}) != []
    assert problems({"results": [{"id": "a", "memory": {"summary": None}}], "count": 1}) != []


async def test_every_kind_of_recall_answer_fits_what_the_client_reads(client):
    seed = await store(client, "We deploy the billing service with Helm charts", tags=["ops"])
    sibling = await store(client, "Helm values for staging live in the infra repository", tags=["infra"])
    near = await store(client, "The on-call rota is pinned in the team channel", tags=["ops"])
    old = await store(client, "Billing invoices are sent on the first", tags=["ops"])
    new = await supersede(client, old, "Billing invoices are sent on the fifth", tags=["ops"])
    await associate(client, seed, near, 0.7)
    for memory_id in (seed, sibling):
        await entity_tagged(client, memory_id, "entity:tools:helm")
    await indexed(client, seed, sibling, near, old, new)
    asks = {
        "plain": {"query": "billing service"},
        "tagged": {"query": "billing", "tags": "ops", "exclude_tags": "infra", "tag_match": "exact"},
        "windowed": {"query": "billing", "time_query": "last 7 days"},
        "window only": {"start": "2020-01-01T00:00:00Z"},
        "relations": {"query": "billing service deploy", "limit": 1, "expand_relations": "true"},
        "entities": {"query": "billing service deploy", "limit": 1, "expand_entities": "true"},
        "multi": [("queries", "billing"), ("queries", "helm"), ("per_query_limit", "2")],
        "decomposed": {"query": "Would Helm suit the billing service?", "auto_decompose": "true"},
        "state replacement": {"query": "billing invoices first", "state_debug": "true"},
        "history": {"query": "billing invoices", "state_mode": "history"},
        "fallback": {"query": "helm staging", "tags": "ops", "scope_fallback": "true"},
        "context": {"query": "billing", "language": "python", "context": "deploys"},
        "floors": {"query": "billing", "min_score": "0.01", "adaptive_floor": "true"},
    }
    seen: set[str] = set()
    for name, params in asks.items():
        reply = await client.get("/recall", params=params)
        assert reply.status_code == 200, (name, reply.text)
        body = reply.json()
        assert problems(body) == [], name
        assert body["results"], name
        seen.update(r["match_type"] for r in body["results"])
        seen.update(key for r in body["results"] for key in ("outside_tag_scope", "related_to") if key in r)
        seen.update(key for key in ("expansion", "entity_expansion", "state_filter", "tag_scope") if key in body)
    # The answers above did carry what the schema types.
    assert {"relation", "entity_expansion", "state_replacement", "outside_tag_scope", "related_to"} <= seen
    assert {"expansion", "entity_expansion", "state_filter", "tag_scope"} <= seen
