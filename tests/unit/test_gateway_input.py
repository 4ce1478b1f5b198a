"""The gateway's own input handling, without services: strict JSON, the body
size limit, CORS, and the envelope for unknown routes and methods."""

from __future__ import annotations

import httpx
import pytest

from gateway.app import create_app
from gateway.envelope import ApiError
from gateway.routes.body import decode_json, is_json_media_type
from services.core.settings import Settings

TOKEN = "unit-token"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


def app_client(**settings) -> httpx.AsyncClient:
    """The app over ASGI; no lifespan, so nothing past the gateway is reachable."""
    app = create_app(Settings(_env_file=None, **settings), TOKEN)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway")


@pytest.mark.parametrize(
    "raw, words",
    [
        (b'{"importance": NaN}', "NaN is not a JSON number"),
        (b'{"importance": -Infinity}', "-Infinity is not a JSON number"),
        (b'{"importance": 1e400}', "out of range"),
        (b'{"importance": ' + b"9" * 400 + b"}", "out of range"),
        (b'{"metadata": {"n": 18446744073709551616}}', "18446744073709551616 is out of range"),
        (b'{"metadata": {"n": -9223372036854775809}}', "out of range"),
        (b'{"content": "\\ud800"}', "lone surrogate"),
        (b'{"content": "x"', "malformed JSON"),
        (b"\xff\xfe\x00", "malformed JSON"),
        (b"\xc3\x28", "malformed JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ],
)
def test_bodies_json_cannot_carry_are_400(raw, words):
    with pytest.raises(ApiError) as caught:
        decode_json(raw)
    assert caught.value.code == 400 and words in caught.value.message


@pytest.mark.parametrize(
    "raw, where",
    [
        (b'{"content": "a\\u0000b"}', "'content'"),
        (b'{"memories": [{"content": "ok"}, {"tags": ["x", "\\u0000"]}]}', "'memories[1].tags[1]'"),
        (b'{"metadata": {"k\\u0000": 1}}', "'metadata.k\\u0000'"),
        (b'"\\u0000"', "'request body'"),
    ],
)
def test_a_nul_character_is_400_naming_where_it_is(raw, where):
    with pytest.raises(ApiError) as caught:
        decode_json(raw)
    assert caught.value.code == 400 and caught.value.reason == "NUL_CHARACTER"
    assert where in caught.value.message


def test_what_json_can_carry_is_kept():
    body = '{"content": "café \\ud83d\\ude00 \\\\u0000", "n": 12345678901234567890, "x": -1.5e-300}'
    assert decode_json(body.encode()) == {"content": "café 😀 \\u0000", "n": 12345678901234567890, "x": -1.5e-300}
    assert decode_json(b'\xef\xbb\xbf{"bom": true}') == {"bom": True}


@pytest.mark.parametrize(
    "content_type, json",
    [
        ("application/json", True),
        ("APPLICATION/JSON ; charset=UTF-8", True),
        ("application/vnd.api+json", True),
        ("application/merge-patch+json; charset=utf-8", True),
        ("application/+json", False),
        ("application/jsonp", False),
        ("text/json", False),
        ("text/plain; charset=utf-8", False),
        ("json", False),
        ("", False),
    ],
)
def test_what_counts_as_a_json_content_type(content_type, json):
    assert is_json_media_type(content_type) is json


async def test_a_body_not_sent_as_json_is_415_before_it_is_parsed():
    async with app_client() as client:
        reply = await client.post("/memory", content=b"{not json", headers={**AUTH, "Content-Type": "text/plain"})
    assert reply.status_code == 415
    assert reply.json()["reason"] == "UNSUPPORTED_MEDIA_TYPE" and "text/plain" in reply.json()["message"]


async def test_a_declared_length_over_the_limit_is_413_before_the_body_is_read():
    async with app_client(max_request_bytes=1000) as client:
        reply = await client.post("/memory", content=b"{" + b" " * 2000 + b"}", headers=AUTH)
    assert reply.status_code == 413
    assert reply.json() == {
        "status": "error",
        "code": 413,
        "message": "request body is larger than the limit of 1000 bytes",
        "reason": "REQUEST_TOO_LARGE",
    }


async def test_a_chunked_body_is_counted_and_refused_past_the_limit():
    async def chunks():
        for _ in range(10):
            yield b" " * 300

    async with app_client(max_request_bytes=1000) as client:
        reply = await client.post("/memory", content=chunks(), headers=AUTH)
    assert reply.status_code == 413 and reply.json()["reason"] == "REQUEST_TOO_LARGE"


async def test_unknown_routes_and_methods_answer_in_the_envelope():
    async with app_client() as client:
        missing = await client.get("/no/such/route", headers=AUTH)
        wrong = await client.put("/memory/abc", headers=AUTH)
    assert missing.status_code == 404
    assert missing.json() == {"status": "error", "code": 404, "message": "no route for /no/such/route"}
    assert wrong.status_code == 405
    assert wrong.json() == {"status": "error", "code": 405, "message": "method PUT not allowed on /memory/abc"}


async def test_cors_allows_any_origin_by_default_as_the_reference_does():
    preflight = {"Origin": "https://app.example", "Access-Control-Request-Method": "POST"}
    async with app_client() as client:
        allowed = await client.options("/memory", headers=preflight)
        answered = await client.get("/no/such/route", headers={"Origin": "https://app.example"})
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == "*"
    assert "POST" in allowed.headers["access-control-allow-methods"]
    assert answered.headers["access-control-allow-origin"] == "*"  # errors carry it too


async def test_cors_origins_are_a_setting():
    async with app_client(cors_allow_origins="https://a.example, https://b.example") as client:
        preflight = {"Access-Control-Request-Method": "GET"}
        allowed = await client.options("/recall", headers={**preflight, "Origin": "https://b.example"})
        refused = await client.options("/recall", headers={**preflight, "Origin": "https://evil.example"})
        simple = await client.get("/no/such/route", headers={"Origin": "https://evil.example"})
    assert allowed.headers["access-control-allow-origin"] == "https://b.example"
    assert refused.status_code == 400 and "access-control-allow-origin" not in refused.headers
    assert "access-control-allow-origin" not in simple.headers


ADMIN = {**AUTH, "X-Admin-Token": "unit-admin"}


@pytest.mark.parametrize(
    "method, path, body, headers, reason, field",
    [
        ("GET", "/recall?min_score=high", None, AUTH, "NOT_A_NUMBER", "min_score"),
        ("GET", "/recall?diversity_factor=inf", None, AUTH, "NOT_A_NUMBER", "diversity_factor"),
        ("GET", "/recall?state_debug=maybe", None, AUTH, "NOT_A_BOOLEAN", "state_debug"),
        ("GET", "/recall?embedding=0.1,x", None, AUTH, "INVALID_EMBEDDING", "embedding"),
        ("POST", "/memory", b"", AUTH, "BODY_NOT_OBJECT", "request body"),
        ("POST", "/memory", b"[1]", AUTH, "BODY_NOT_OBJECT", "request body"),
        ("POST", "/memory", b'{"content": 5}', AUTH, "NOT_A_STRING", "content"),
        ("POST", "/memory", b'{"content": "x", "supersede_reason": 1}', AUTH, "NOT_A_STRING", "supersede_reason"),
        ("POST", "/memory/batch", b'{"memories": 1}', AUTH, "MEMORIES_REQUIRED", "memories"),
        ("POST", "/memory/batch", b'{"memories": [1]}', AUTH, "NOT_AN_OBJECT", "index 0"),
        ("POST", "/associate", b'{"associations": 3}', AUTH, "NOT_A_LIST", "associations"),
        ("POST", "/associate", b'{"associations": [3]}', AUTH, "NOT_AN_OBJECT", "index 0"),
        ("POST", "/enrichment/reprocess", b'{"ids": 3}', ADMIN, "NOT_A_LIST", "ids"),
        ("POST", "/admin/reembed", b'{"ids": {}}', ADMIN, "NOT_A_LIST", "ids"),
        ("POST", "/admin/reindex", b'{"batch_size": "10"}', ADMIN, "NOT_AN_INTEGER", "batch_size"),
        ("POST", "/consolidate", b'{"mode": 1}', ADMIN, "NOT_A_STRING", "mode"),
        ("POST", "/consolidate", b'{"dry_run": "yes"}', ADMIN, "NOT_A_BOOLEAN", "dry_run"),
        ("POST", "/consolidate", b'{"every_tenant": "yes"}', AUTH, "NOT_A_BOOLEAN", "every_tenant"),
    ],
)
async def test_a_malformed_value_has_its_own_reason_naming_the_field(method, path, body, headers, reason, field):
    async with app_client(admin_api_token="unit-admin") as client:
        reply = await client.request(method, path, content=body, headers=headers)
    answer = reply.json()
    assert (reply.status_code, answer["status"], answer["code"], answer["reason"]) == (400, "error", 400, reason)
    assert field in answer["message"]
