"""Input handling over real HTTP: a wrong JSON type anywhere, on any route
that reads a body or a query, is a 400 envelope naming the field (never a
500, never a framework 422); documented leniencies stay; the body limit, the
largest legitimate batch, and CORS."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.e2e

ADMIN = {"X-Admin-Token": "input-admin-token"}
JSON = {"Content-Type": "application/json"}
UNKNOWN = "00000000-0000-0000-0000-000000000000"
STORED = "{stored}"  # replaced by the id of a stored memory (an unknown id is 404 before the body is read)
LIMIT = 16 * 1024 * 1024


@pytest.fixture
def stack_settings(stack_settings):
    return stack_settings.override({"admin_api_token": ADMIN["X-Admin-Token"], "max_request_bytes": LIMIT})


def not_400_naming(reply, field: str) -> str | None:
    """Why the reply is not a 400 envelope naming `field`; None when it is."""
    if reply.status_code != 400:
        return f"{reply.status_code}: {reply.text[:200]}"
    body = reply.json()
    if body.get("status") != "error" or body.get("code") != 400 or field not in body.get("message", ""):
        return f"not an envelope naming {field!r}: {body}"
    return None


def assert_400_naming(reply, field: str) -> None:
    assert not_400_naming(reply, field) is None, (field, not_400_naming(reply, field))


BAD_BODIES = [
    ("POST", "/memory", {"content": 5}, "content"),
    ("POST", "/memory", {"content": "x", "tags": {"a": 1}}, "tags"),
    ("POST", "/memory", {"content": "x", "tags": [1, 2]}, "tags"),
    ("POST", "/memory", {"content": "x", "importance": "high"}, "importance"),
    ("POST", "/memory", {"content": "x", "importance": True}, "importance"),
    ("POST", "/memory", {"content": "x", "type": "Decision", "confidence": [0.5]}, "confidence"),
    ("POST", "/memory", {"content": "x", "metadata": []}, "metadata"),
    ("POST", "/memory", {"content": "x", "metadata": "text"}, "metadata"),
    ("POST", "/memory", {"content": "x", "type": 5}, "type"),
    ("POST", "/memory", {"content": "x", "timestamp": 1705314600}, "timestamp"),
    ("POST", "/memory", {"content": "x", "t_invalid": "9999-12-31T23:59:59-23:59"}, "t_invalid"),
    ("POST", "/memory", {"content": "x", "embedding": "abc"}, "embedding"),
    ("POST", "/memory", {"content": "x", "embedding": [1, "a"]}, "embedding"),
    ("POST", "/memory", {"content": "x", "supersedes_memory_id": 5}, "supersedes_memory_id"),
    ("POST", "/memory", {"content": "x", "supersede_reason": ["why"]}, "supersede_reason"),
    ("POST", "/memory", {"content": "a\u0000b"}, "content"),
    ("POST", "/memory", {"content": "x", "metadata": {"n": 2**64}}, "out of range"),  # no response could print it
    ("POST", "/memory/batch", {"memories": "x"}, "memories"),
    ("POST", "/memory/batch", {"memories": [{"content": "ok"}, 5]}, "index 1"),
    ("POST", "/memory/batch", {"memories": [{"content": "ok"}, {"content": 5}]}, "index 1: 'content'"),
    ("POST", "/memory/batch", {"memories": [{"content": "ok", "importance": "high"}]}, "index 0: 'importance'"),
    ("POST", "/memory/batch", {"memories": [{"content": "ok", "tags": ["\u0000"]}]}, "memories[0].tags[0]"),
    ("PATCH", f"/memory/{STORED}", {"importance": "high"}, "importance"),
    ("PATCH", f"/memory/{STORED}", {"tags": {"a": 1}}, "tags"),
    ("PATCH", f"/memory/{STORED}", {"content": 7}, "content"),
    ("PATCH", f"/memory/{STORED}", {"metadata": [1]}, "metadata"),
    ("POST", "/associate", {"memory1_id": 5, "memory2_id": UNKNOWN, "type": "RELATES_TO"}, "memory1_id"),
    ("POST", "/associate", {"memory1_id": UNKNOWN, "memory2_id": [], "type": "RELATES_TO"}, "memory2_id"),
    ("POST", "/associate", {"memory1_id": UNKNOWN, "memory2_id": UNKNOWN[:-1] + "1", "type": 3}, "type"),
    (
        "POST",
        "/associate",
        {"memory1_id": UNKNOWN, "memory2_id": UNKNOWN[:-1] + "1", "type": "RELATES_TO", "strength": "x"},
        "strength",
    ),
    ("POST", "/associate", {"associations": {}}, "associations"),
    ("POST", "/associate", {"associations": [5]}, "index 0"),
    ("POST", "/enrichment/reprocess", {"ids": 5}, "ids"),
    ("POST", "/enrichment/reprocess", {"ids": [1, 2]}, "ids"),
    ("POST", "/admin/reembed", {"ids": {"a": 1}}, "ids"),
    ("POST", "/admin/reembed", {"ids": 0}, "ids"),
    ("POST", "/admin/reembed", {"ids": False}, "ids"),
    ("POST", "/admin/reembed", {"batch_size": "ten"}, "batch_size"),
    ("POST", "/admin/reembed", {"batch_size": 2**40}, "batch_size"),
    ("POST", "/admin/reindex", {"batch_size": 1.5}, "batch_size"),
    ("POST", "/admin/reindex", {"batch_size": -1}, "batch_size"),
    ("POST", "/consolidate", {"mode": 5}, "mode"),
    ("POST", "/consolidate", {"dry_run": "yes"}, "dry_run"),
    ("POST", "/consolidate", {"every_tenant": 1}, "every_tenant"),
    ("POST", "/consolidate", {"mode": "nap"}, "mode"),
]


async def stored_id(client) -> str:
    reply = await client.post("/memory", json={"content": "a memory to patch"})
    assert reply.status_code == 201, reply.text
    return reply.json()["memory_id"]


async def test_a_wrong_json_type_is_400_naming_the_field(client):
    stored = await stored_id(client)
    wrong = {}
    for method, path, body, field in BAD_BODIES:
        reply = await client.request(method, path.replace(STORED, stored), json=body, headers=ADMIN)
        if (why := not_400_naming(reply, field)) is not None:
            wrong[f"{method} {path} {body}"] = why
    assert not wrong, wrong


BODY_ROUTES = [
    ("POST", "/memory"),
    ("POST", "/memory/batch"),
    ("PATCH", f"/memory/{STORED}"),
    ("POST", "/associate"),
    ("POST", "/enrichment/reprocess"),
    ("POST", "/admin/reembed"),
    ("POST", "/admin/reindex"),
    ("POST", "/consolidate"),
]
MALFORMED = [
    (b"[1, 2]", "JSON object"),
    (b"null", "JSON object"),
    (b'"text"', "JSON object"),
    (b"5", "JSON object"),
    (b"{not json", "malformed JSON"),
    (b"\xff\xfe\xfa", "malformed JSON"),
    (b'{"content": NaN}', "NaN"),
    (b'{"content": "\\ud800"}', "lone surrogate"),
    (b"[" * 50_000, "malformed JSON"),
]


async def test_a_body_that_is_no_json_object_is_400_on_every_route_that_reads_one(client):
    stored = await stored_id(client)
    wrong = {}
    for method, path in BODY_ROUTES:
        for raw, words in MALFORMED:
            reply = await client.request(method, path.replace(STORED, stored), content=raw, headers={**JSON, **ADMIN})
            if (why := not_400_naming(reply, words)) is not None:
                wrong[f"{method} {path} {raw[:20]!r}"] = why
    assert not wrong, wrong


NOT_JSON_TYPES = [
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/jsonx",
    "application/+json",
    "text/json",
    None,  # no Content-Type at all
]
JSON_TYPES = ["application/json", "Application/JSON; charset=utf-8", "application/merge-patch+json"]


async def test_a_body_sent_as_anything_but_json_is_415_naming_the_type(client):
    """Every route that reads a body: 415 in the envelope, nothing written;
    application/json with a charset, and application/*+json, are JSON."""
    stored = await stored_id(client)
    body = json.dumps({"content": "typed", "memories": [{"content": "typed"}], "importance": 0.4}).encode()
    wrong = {}
    for method, path in BODY_ROUTES:
        for media in NOT_JSON_TYPES:
            headers = {**ADMIN, **({"Content-Type": media} if media else {})}
            reply = await client.request(method, path.replace(STORED, stored), content=body, headers=headers)
            named = media.split(";")[0] if media else "none was sent"
            envelope = reply.json() if reply.headers.get("content-type", "").startswith("application/json") else {}
            if reply.status_code != 415 or envelope.get("code") != 415 or named not in envelope.get("message", ""):
                wrong[f"{method} {path} {media}"] = f"{reply.status_code}: {reply.text[:200]}"
    assert not wrong, wrong
    assert (await client.get("/memory/by-tag", params={"tags": "typed"})).json()["count"] == 0
    for media in JSON_TYPES:
        reply = await client.post("/memory", content=body, headers={"Content-Type": media})
        assert reply.status_code == 201, (media, reply.text)
        patched = await client.patch(f"/memory/{stored}", content=body, headers={"Content-Type": media})
        assert patched.status_code == 200, (media, patched.text)
    # A route whose every field is optional still takes no body at all, whatever it is labelled.
    assert (await client.post("/admin/reindex", headers={**ADMIN, "Content-Type": "text/plain"})).status_code == 200


BAD_QUERIES = [
    ("/recall", {"min_score": "abc"}, "min_score"),
    ("/recall", {"diversity_factor": "lots"}, "diversity_factor"),
    ("/recall", {"recency_bias": "nan"}, "recency_bias"),
    ("/recall", {"state_debug": "maybe"}, "state_debug"),
    ("/recall", {"expand_relations": "2"}, "expand_relations"),
    ("/recall", {"embedding": "a,b"}, "embedding"),
    ("/recall", {"state_mode": "sometimes"}, "state_mode"),
    ("/recall", {"sort": "random"}, "sort"),
    ("/recall", {"tag_mode": "some"}, "tag_mode"),
    ("/recall", {"start": "last tuesday"}, "start"),
    ("/recall", {"as_of": "0001-01-01T00:00:00+23:59"}, "as_of"),
    ("/recall", {"query": "a\u0000b"}, "query"),
    ("/recall", {"tags": ["ok", "\u0000"]}, "tags"),
    ("/memory/by-tag", {"tags": "x", "offset": "-3"}, "offset"),
    ("/memory/by-tag", {"tags": "x", "state_mode": "all"}, "state_mode"),
    ("/startup-recall", {"state_mode": "all"}, "state_mode"),
    (f"/memories/{UNKNOWN}/related", {"min_strength": "strong"}, "min_strength"),
    ("/graph/snapshot", {"state_mode": "past"}, "state_mode"),
    (f"/graph/neighbors/{UNKNOWN}", {"depth": "9"}, "depth"),
]


async def test_a_wrong_query_value_is_400_naming_the_parameter(client):
    wrong = {}
    for path, params, field in BAD_QUERIES:
        if (why := not_400_naming(await client.get(path, params=params), field)) is not None:
            wrong[f"{path} {params}"] = why
    assert not wrong, wrong


LENIENT = [
    ("/recall", {"limit": "abc", "relation_limit": "x", "format": "detailed", "offset": "10"}),
    ("/recall", {"limit": "99999999999999999999", "expansion_limit": "-4"}),
    ("/memory/by-tag", {"tags": "x", "limit": "lots", "offset": "99999999999999"}),
    ("/startup-recall", {"limit": "-1"}),
    ("/graph/snapshot", {"limit": "1e9"}),
    (f"/graph/neighbors/{STORED}", {"limit": "many", "depth": "deep"}),
    (f"/memories/{STORED}/related", {"limit": "some"}),
]


async def test_documented_leniencies_stay(client):
    """A count that is no whole number means the default, one past int32 is
    clamped, and what clients send but the server ignores is accepted."""
    stored = await stored_id(client)
    for path, params in LENIENT:
        reply = await client.get(path.replace(STORED, stored), params=params)
        assert reply.status_code == 200 and reply.json()["status"] == "success", (path, params, reply.text)


async def test_extra_body_fields_clients_send_are_ignored(client):
    reply = await client.post(
        "/memory", json={"content": "extra fields", "id": "mine", "format": "json", "client": {"v": 2}}
    )
    assert reply.status_code == 201, reply.text
    assert reply.json()["memory_id"] != "mine"


async def test_the_edges_of_the_calendar_and_of_float32_are_not_server_errors(client, stack_settings):
    for when in ("0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z"):
        stored = await client.post("/memory", json={"content": f"at {when}", "timestamp": when, "tags": ["edge"]})
        assert stored.status_code == 201, stored.text
    assert (await client.get("/analyze")).status_code == 200
    listed = await client.get(
        "/memory/by-tag", params={"tags": "edge", "state_mode": "history"}
    )  # one is not yet valid
    assert listed.status_code == 200 and listed.json()["count"] == 2
    huge = await client.post(
        "/memory", json={"content": "v", "embedding": [1e308] * stack_settings.vectors.vector_size}
    )
    assert_400_naming(huge, "embedding")


async def test_unknown_routes_and_methods_answer_in_the_envelope(client):
    missing = await client.get("/memories")
    assert missing.status_code == 404 and missing.json() == {
        "status": "error",
        "code": 404,
        "message": "no route for /memories",
    }
    for method, path in (("PUT", "/memory"), ("POST", f"/memory/{UNKNOWN}"), ("DELETE", "/recall")):
        wrong = await client.request(method, path)
        assert wrong.status_code == 405 and wrong.json()["code"] == 405, (method, path, wrong.text)


async def test_a_body_over_the_limit_is_413_in_the_envelope(client):
    reply = await client.post("/memory", content=b" " * (LIMIT + 1), headers=JSON)
    assert reply.status_code == 413
    assert reply.json()["reason"] == "REQUEST_TOO_LARGE" and str(LIMIT) in reply.json()["message"]
    assert (await client.get("/health")).status_code == 200  # the connection pool recovers


async def test_the_largest_legitimate_batch_goes_through(client, stack_settings):
    """500 memories of 2000 four-byte characters, each with an embedding:
    13.7 MB of JSON, under the body limit, and well past gRPC's default
    4 MiB message size (it used to come back as 429)."""
    vector = [round(0.01 + 0.001 * (i % 7), 3) for i in range(stack_settings.vectors.vector_size)]
    items = [{"content": "\U0001d11e" * 1999 + str(i % 10), "embedding": vector, "tags": ["big"]} for i in range(500)]
    body = json.dumps({"memories": items}).encode()
    assert 4 * 1024 * 1024 < len(body) < LIMIT
    reply = await client.post("/memory/batch", content=body, headers=JSON, timeout=120)
    assert reply.status_code == 201, reply.text[:300]
    assert reply.json()["stored"] == 500


async def test_cors_answers_any_origin(anonymous):
    reply = await anonymous.get("/health", headers={"Origin": "https://console.example"})
    assert reply.headers["access-control-allow-origin"] == "*"
    preflight = await anonymous.options(
        "/memory",
        headers={
            "Origin": "https://console.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
        },
    )
    assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == "*"
