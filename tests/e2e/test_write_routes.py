"""Every write route end to end, through the gateway over HTTP, the services,
FalkorDB and NATS: POST /memory, POST /memory/batch, PATCH and DELETE
/memory/{id}, DELETE /memory/by-tag, POST /associate, supersede mode and
Idempotency-Key.

What the REST surface cannot show (the edges /associate and supersede write)
is read back from the test's own FalkorDB graph; nothing else looks past the
gateway. Publishing events is covered by the NATS tests, not here.
"""

from __future__ import annotations

import asyncio
import random
import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from falkordb.asyncio import FalkorDB

pytestmark = pytest.mark.e2e

#: A well-formed memory id that no test ever stores.
NO_SUCH_ID = "00000000-0000-4000-8000-000000000000"
#: The relation types a client may author through /associate.
AUTHORABLE = (
    "RELATES_TO",
    "LEADS_TO",
    "OCCURRED_BEFORE",
    "PREFERS_OVER",
    "EXEMPLIFIES",
    "CONTRADICTS",
    "REINFORCES",
    "INVALIDATED_BY",
    "EVOLVED_INTO",
    "DERIVED_FROM",
    "PART_OF",
)
#: The batch `qdrant` values the REST contract allows: stored (N)[, queued (M)], queued[ (M|fallback)], unconfigured.
BATCH_QDRANT = re.compile(r"stored \(\d+\)(, queued \(\d+\))?|queued( \((\d+|fallback)\))?|unconfigured")
#: Fields every 201 from POST /memory carries.
CREATED_KEYS = {
    "status",
    "memory_id",
    "stored_at",
    "type",
    "confidence",
    "qdrant",
    "embedding_status",
    "enrichment",
    "metadata",
    "timestamp",
    "updated_at",
    "last_accessed",
    "query_time_ms",
}


# Helpers ------------------------------------------------------------------------------------------------


def assert_error(reply, code: int, *words: str) -> str:
    """The shared envelope with `code`, its message naming each of `words`."""
    assert reply.status_code == code, reply.text
    body = reply.json()
    assert body["status"] == "error" and body["code"] == code, body
    assert isinstance(body["message"], str) and body["message"], body
    for word in words:
        assert word.lower() in body["message"].lower(), (word, body["message"])
    return body["message"]


def at(value: str) -> datetime:
    """An ISO 8601 string the API returned (or a test sent) as an aware datetime."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def assert_utc(value: str) -> None:
    assert value.endswith("+00:00"), value


def assert_between(value: str, before: datetime, after: datetime) -> None:
    """`value` is a time taken while the request ran (a second of slack)."""
    moment = at(value)
    assert before - timedelta(seconds=1) <= moment <= after + timedelta(seconds=1), (value, before, after)


def vector(settings, seed: int) -> list[float]:
    """A vector of the configured size, with values exact in float32."""
    rng = random.Random(seed)
    return [rng.randint(-64, 64) / 64 for _ in range(settings.vectors.vector_size)]


async def store(client, **fields) -> str:
    """POST /memory; the new memory's id."""
    reply = await client.post("/memory", json=fields)
    assert reply.status_code == 201, reply.text
    return reply.json()["memory_id"]


async def store_many(client, memories: list[dict]) -> list[str]:
    """POST /memory/batch; the new memories' ids."""
    reply = await client.post("/memory/batch", json={"memories": memories})
    assert reply.status_code == 201, reply.text
    return reply.json()["memory_ids"]


async def fetch(client, memory_id: str) -> dict:
    """GET /memory/{id}; the stored memory."""
    reply = await client.get(f"/memory/{memory_id}")
    assert reply.status_code == 200, reply.text
    return reply.json()["memory"]


async def exists(client, memory_id: str) -> bool:
    reply = await client.get(f"/memory/{memory_id}")
    assert reply.status_code in (200, 400, 404), reply.text  # 400: not even a memory id
    return reply.status_code == 200


async def memory_count(client) -> int:
    """The number of stored memories, as GET /health reports it."""
    reply = await client.get("/health")
    count = reply.json()["memory_count"]
    assert isinstance(count, int), reply.text
    return count


async def edges_from(settings, memory_id: str) -> list[tuple[str, str, dict]]:
    """(type, target id, properties) of every edge leaving a memory, read from
    the test's graph: the REST surface has no route that lists them."""
    db = FalkorDB(host="127.0.0.1", port=settings.graph.falkordb_port)
    try:
        result = await db.select_graph(settings.graph.falkordb_graph).query(
            "MATCH (a:Memory {id: $id})-[e]->(b:Memory) RETURN type(e), b.id, properties(e)", {"id": memory_id}
        )
    finally:
        await db.aclose()
    return sorted((row[0], row[1], dict(row[2])) for row in result.result_set)


def stable(memory: dict) -> dict:
    """A memory without what any read or write moves (access time, version)."""
    return {k: v for k, v in memory.items() if k not in ("last_accessed", "updated_at", "version")}


# POST /memory ---------------------------------------------------------------------------------------------


async def test_create_answers_201_with_every_documented_field(client, settings):
    sent = {
        "id": "client-chosen-id",
        "content": "Chose PostgreSQL over MongoDB. Need ACID guarantees.",
        "type": "Decision",
        "importance": 0.9,
        "tags": ["project-alpha", "Database"],
        "metadata": {"files_modified": ["db/config.py"], "nested": {"ok": True}},
        "timestamp": "2025-01-15T10:30:00Z",
    }
    before = datetime.now(UTC)
    reply = await client.post("/memory", json=sent)
    after = datetime.now(UTC)
    assert reply.status_code == 201, reply.text
    body = reply.json()
    assert body.keys() >= CREATED_KEYS, CREATED_KEYS - body.keys()
    assert body["status"] == "success"
    assert body["memory_id"] != sent["id"] and str(uuid.UUID(body["memory_id"])) == body["memory_id"]
    assert body["type"] == "Decision" and body["confidence"] == 0.9
    assert body["metadata"] == sent["metadata"]
    assert body["timestamp"] == body["updated_at"] == body["last_accessed"] == "2025-01-15T10:30:00+00:00"
    assert_between(body["stored_at"], before, after)
    # No embedding was sent: its generation is queued, as is enrichment.
    assert (body["qdrant"], body["embedding_status"], body["enrichment"]) == ("queued", "queued", "queued")
    assert isinstance(body["query_time_ms"], (int, float)) and body["query_time_ms"] >= 0

    memory = await fetch(client, body["memory_id"])
    assert memory["id"] == body["memory_id"]
    for key in ("content", "type", "importance", "tags", "metadata"):
        assert memory[key] == sent[key], key
    assert await exists(client, sent["id"]) is False
    assert await memory_count(client) == 1


async def test_content_is_1_to_2000_characters(client):
    for content in ("x", "y" * 2000):
        memory = await fetch(client, await store(client, content=content))
        assert memory["content"] == content
    for payload in ({"content": "z" * 2001}, {"content": ""}, {}):
        assert_error(await client.post("/memory", json=payload), 400, "content")
    assert await memory_count(client) == 2


async def test_importance_and_confidence_are_numbers_from_0_to_1(client):
    for payload, field in (
        ({"importance": 1.5}, "importance"),
        ({"importance": -0.1}, "importance"),
        ({"importance": "high"}, "importance"),
        ({"importance": True}, "importance"),
        ({"type": "Decision", "confidence": 1.01}, "confidence"),
        ({"type": "Decision", "confidence": -1}, "confidence"),
        ({"type": "Decision", "confidence": "sure"}, "confidence"),
    ):
        assert_error(await client.post("/memory", json={"content": "bounds", **payload}), 400, field)
    assert await memory_count(client) == 0
    low = await fetch(client, await store(client, content="low", type="Habit", importance=0, confidence=0))
    high = await fetch(client, await store(client, content="high", type="Habit", importance=1, confidence=1))
    assert (low["importance"], low["confidence"]) == (0.0, 0.0)
    assert (high["importance"], high["confidence"]) == (1.0, 1.0)


async def test_confidence_defaults_to_0_9_only_when_a_type_is_sent(client):
    typed = await client.post("/memory", json={"content": "Plain words", "type": "Insight"})
    assert typed.status_code == 201, typed.text
    assert (typed.json()["type"], typed.json()["confidence"]) == ("Insight", 0.9)
    chosen = await fetch(client, await store(client, content="Plain words", type="Insight", confidence=0.4))
    assert chosen["confidence"] == 0.4
    # Without a type the classifier decides, and a confidence sent is ignored.
    ignored = await client.post("/memory", json={"content": "I decided to use Redis", "confidence": 0.2})
    assert (ignored.json()["type"], ignored.json()["confidence"]) == ("Decision", 0.6)
    stored = await fetch(client, ignored.json()["memory_id"])
    assert (stored["type"], stored["confidence"]) == ("Decision", 0.6)
    # Ignored even when out of range; a non-numeric confidence is still refused.
    out_of_range = await client.post("/memory", json={"content": "The sky is blue", "confidence": 5})
    assert out_of_range.status_code == 201, out_of_range.text
    assert (out_of_range.json()["type"], out_of_range.json()["confidence"]) == ("Memory", 0.3)
    assert_error(
        await client.post("/memory", json={"content": "The sky is blue", "confidence": "high"}), 400, "confidence"
    )


async def test_an_explicit_type_is_stored_as_sent(client):
    for sent in ("decision", "Runbook", "MetaPattern"):
        memory = await fetch(client, await store(client, content="I decided to use X", type=sent))
        assert (memory["type"], memory["confidence"]) == (sent, 0.9)


async def test_without_a_type_the_content_is_classified(client):
    # Regex patterns first (0.6 for one match, 0.8 for two); no LLM key is
    # configured in tests, so unmatched text falls back to Memory, 0.3.
    for content, kind, confidence in (
        ("I decided to use FastAPI for the gateway", "Decision", 0.6),
        ("We usually deploy on Fridays and typically roll back by noon", "Pattern", 0.8),
        ("I prefer tabs", "Preference", 0.6),
        ("I realized the cache key was wrong", "Insight", 0.6),
        ("The sky is blue", "Memory", 0.3),
    ):
        reply = await client.post("/memory", json={"content": content})
        assert reply.status_code == 201, reply.text
        assert (reply.json()["type"], reply.json()["confidence"]) == (kind, confidence), content
        memory = await fetch(client, reply.json()["memory_id"])
        assert (memory["type"], memory["confidence"]) == (kind, confidence), content


async def test_tags_are_a_list_or_one_string_with_prefixes_computed(client):
    single = await fetch(client, await store(client, content="one tag", tags="Alpha, beta"))
    assert single["tags"] == ["Alpha, beta"]
    assert single["tag_prefixes"] == ["alpha, beta"]
    sent = [" Project:Alpha/API ", "", "   ", "db", "DB"]
    listed = await fetch(client, await store(client, content="many tags", tags=sent))
    assert listed["tags"] == sent
    assert listed["tag_prefixes"] == ["project", "project:alpha", "project:alpha/api", "db"]
    for tags in (5, [1, 2], ["ok", 3], {"a": "b"}, True):
        assert_error(await client.post("/memory", json={"content": "bad tags", "tags": tags}), 400, "tags")
    assert await memory_count(client) == 2


async def test_metadata_must_be_a_json_object(client):
    for metadata in ([1, 2], "text", 5, True):
        assert_error(await client.post("/memory", json={"content": "m", "metadata": metadata}), 400, "metadata")
    assert await memory_count(client) == 0
    sent = {"a": [1, {"b": None}], "c": "d"}
    assert (await fetch(client, await store(client, content="m", metadata=sent)))["metadata"] == sent


async def test_timestamps_are_iso_8601_returned_in_utc(client):
    memory_id = await store(
        client,
        content="timed",
        timestamp="2025-01-15T10:30:00Z",
        t_valid="2025-01-16T02:00:00+02:00",
        t_invalid="2030-01-01T00:00:00.500000Z",
        updated_at="2025-01-17T08:00:00-05:00",
        last_accessed="2025-01-18T09:00:00Z",
    )
    memory = await fetch(client, memory_id)
    assert memory["timestamp"] == "2025-01-15T10:30:00+00:00"
    assert memory["t_valid"] == "2025-01-16T00:00:00+00:00"
    assert memory["t_invalid"] == "2030-01-01T00:00:00.500000+00:00"
    assert memory["updated_at"] == "2025-01-17T13:00:00+00:00"
    for field in ("timestamp", "t_valid", "t_invalid", "updated_at", "last_accessed"):
        for bad in ("yesterday-ish", "2025-13-45T10:00:00Z", 1736937000):
            assert_error(await client.post("/memory", json={"content": "t", field: bad}), 400, field)
    assert await memory_count(client) == 1


async def test_time_fields_default_in_a_chain(client):
    # t_valid and updated_at default to timestamp, last_accessed to updated_at.
    reply = await client.post("/memory", json={"content": "chain", "timestamp": "2024-05-01T12:00:00Z"})
    body = reply.json()
    assert body["timestamp"] == body["updated_at"] == body["last_accessed"] == "2024-05-01T12:00:00+00:00"
    memory = await fetch(client, body["memory_id"])
    assert memory["t_valid"] == memory["updated_at"] == "2024-05-01T12:00:00+00:00"
    assert memory["t_invalid"] is None

    reply = await client.post("/memory", json={"content": "chain", "updated_at": "2024-06-01T00:00:00Z"})
    assert reply.json()["last_accessed"] == reply.json()["updated_at"] == "2024-06-01T00:00:00+00:00"

    before = datetime.now(UTC)
    reply = await client.post("/memory", json={"content": "chain"})
    after = datetime.now(UTC)
    body = reply.json()
    assert_between(body["timestamp"], before, after)
    assert_utc(body["timestamp"])
    assert body["updated_at"] == body["last_accessed"] == body["timestamp"]
    assert (await fetch(client, body["memory_id"]))["t_valid"] == body["timestamp"]


async def test_embedding_is_a_list_or_a_comma_separated_string(client, settings):
    as_list = vector(settings, 1)
    stored = await fetch(client, await store(client, content="list", embedding=as_list))
    assert stored["embedding"] == as_list
    as_string = vector(settings, 2)
    stored = await fetch(client, await store(client, content="text", embedding=",".join(map(str, as_string))))
    assert stored["embedding"] == as_string
    size = settings.vectors.vector_size
    for bad in (
        as_list[:-1],
        [*as_list, 0.5],
        ",".join(["0.5"] * (size + 1)),
        ",".join(["0.5"] * (size - 1) + ["x"]),
        [*as_list[:-1], "0.5"],
        {"values": as_list},
    ):
        assert_error(await client.post("/memory", json={"content": "e", "embedding": bad}), 400, "embedding")
    assert await memory_count(client) == 2


async def test_a_supplied_embedding_is_reported_provided(client, settings):
    """AutoMem's embedding_status: provided when the request carries the vector, queued when it is generated."""
    given = await client.post("/memory", json={"content": "with a vector", "embedding": vector(settings, 3)})
    assert given.status_code == 201, given.text
    assert given.json()["embedding_status"] == "provided"
    generated = await client.post("/memory", json={"content": "without a vector"})
    assert generated.json()["embedding_status"] == "queued"


# POST /memory/batch ---------------------------------------------------------------------------------------


async def test_batch_stores_every_item_readable_by_id(client):
    items = [
        {"content": "Prefer PostgreSQL for OLTP", "type": "Preference", "importance": 0.9, "tags": ["db"]},
        {"content": "Redis is the session cache", "type": "Context", "metadata": {"k": "v"}},
        {"content": "I decided to use Kafka", "confidence": 0.1, "timestamp": "2025-02-01T00:00:00Z", "tags": "x:y"},
    ]
    reply = await client.post("/memory/batch", json={"memories": items})
    assert reply.status_code == 201, reply.text
    body = reply.json()
    assert {"status", "stored", "memory_ids", "qdrant", "enrichment", "query_time_ms"} <= body.keys()
    assert body["status"] == "success" and body["stored"] == 3
    assert len(set(body["memory_ids"])) == 3
    assert BATCH_QDRANT.fullmatch(body["qdrant"]), body["qdrant"]
    assert body["enrichment"] == "queued"
    memories = [await fetch(client, i) for i in body["memory_ids"]]
    assert [m["content"] for m in memories] == [i["content"] for i in items]
    assert [(m["type"], m["confidence"]) for m in memories] == [
        ("Preference", 0.9),
        ("Context", 0.9),
        ("Decision", 0.6),
    ]
    assert memories[0]["importance"] == 0.9 and memories[1]["importance"] == 0.5
    assert memories[1]["metadata"] == {"k": "v"}
    assert memories[2]["timestamp"] == memories[2]["t_valid"] == "2025-02-01T00:00:00+00:00"
    assert (memories[2]["tags"], memories[2]["tag_prefixes"]) == (["x:y"], ["x", "x:y"])
    assert await memory_count(client) == 3


async def test_batch_items_ignore_id_embedding_and_validity_window(client, settings):
    item = {
        "id": "client-id",
        "content": "windowless",
        "timestamp": "2025-03-01T00:00:00Z",
        "embedding": vector(settings, 3),
        "t_valid": "2030-01-01T00:00:00Z",
        "t_invalid": "2020-01-01T00:00:00Z",
    }
    [memory_id] = await store_many(client, [item])
    assert memory_id != item["id"]
    memory = await fetch(client, memory_id)
    assert memory["embedding"] is None
    assert memory["t_valid"] == memory["timestamp"] == "2025-03-01T00:00:00+00:00"
    assert memory["t_invalid"] is None


async def test_batch_body_must_be_an_object_with_1_to_500_memories(client):
    for payload in ([{"content": "bare array"}], {}, {"memories": "x"}, {"memories": []}):
        assert_error(await client.post("/memory/batch", json=payload), 400, "memories")
    too_many = {"memories": [{"content": f"m{i}"} for i in range(501)]}
    assert_error(await client.post("/memory/batch", json=too_many), 400, "memories", "500")
    for raw in (b"{not json", b""):
        reply = await client.post("/memory/batch", content=raw, headers={"content-type": "application/json"})
        assert_error(reply, 400)
    assert await memory_count(client) == 0


async def test_one_bad_item_rejects_the_whole_batch(client):
    good = {"content": "fine", "tags": ["batch"]}
    cases = [
        ([good, good, {"tags": ["no content"]}], 2, "content"),
        ([good, {"content": "x", "importance": 2}], 1, "importance"),
        ([{"content": "x", "tags": 5}, good], 0, "tags"),
        ([good, good, good, {"content": "x", "timestamp": "not a time"}], 3, "timestamp"),
        ([good, {"content": "x" * 2001}], 1, "content"),
        ([good, good, {"content": "x", "metadata": [1]}], 2, "metadata"),
        ([good, "just a string"], 1, ""),
        ([good, {"content": "x", "type": "Decision", "confidence": "high"}], 1, "confidence"),
        ([good, good, {"content": 5}], 2, "content"),
    ]
    for memories, index, field in cases:
        reply = await client.post("/memory/batch", json={"memories": memories})
        assert_error(reply, 400, f"index {index}", field)
    assert await memory_count(client) == 0


# PATCH /memory/{id} ---------------------------------------------------------------------------------------


async def test_patch_changes_only_the_fields_sent(client, settings):
    memory_id = await store(
        client,
        content="Chose PostgreSQL over MongoDB",
        type="Decision",
        confidence=0.7,
        importance=0.4,
        tags=["db", "team:core"],
        metadata={"k": "v"},
        timestamp="2025-01-15T10:30:00Z",
        t_invalid="2031-01-01T00:00:00Z",
        updated_at="2025-01-16T00:00:00Z",
        embedding=vector(settings, 4),
    )
    original = await fetch(client, memory_id)
    before = datetime.now(UTC)
    reply = await client.patch(f"/memory/{memory_id}", json={"importance": 0.8})
    after = datetime.now(UTC)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["status"] == "success" and body["memory_id"] == memory_id
    assert body["content_changed"] is False
    updated = await fetch(client, memory_id)
    assert updated["importance"] == 0.8
    assert stable(updated) == {**stable(original), "importance": 0.8}
    # updated_at moves to now when the request does not send it.
    assert_between(updated["updated_at"], before, after)


async def test_patch_sets_every_updatable_field(client):
    memory_id = await store(client, content="before", type="Context", tags=["old"])
    changes = {
        "type": "Insight",
        "confidence": 0.55,
        "importance": 0.25,
        "timestamp": "2024-01-01T00:00:00Z",
        "t_valid": "2024-01-02T00:00:00+01:00",
        "t_invalid": "2029-01-01T00:00:00Z",
        "updated_at": "2024-02-01T00:00:00Z",
    }
    assert (await client.patch(f"/memory/{memory_id}", json=changes)).status_code == 200
    memory = await fetch(client, memory_id)
    assert (memory["type"], memory["confidence"], memory["importance"]) == ("Insight", 0.55, 0.25)
    assert memory["timestamp"] == "2024-01-01T00:00:00+00:00"
    assert memory["t_valid"] == "2024-01-01T23:00:00+00:00"
    assert memory["t_invalid"] == "2029-01-01T00:00:00+00:00"
    # An updated_at that is sent is the value stored.
    assert memory["updated_at"] == "2024-02-01T00:00:00+00:00"
    assert (memory["content"], memory["tags"]) == ("before", ["old"])


async def test_patch_cannot_change_the_id(client):
    memory_id = await store(client, content="fixed id")
    other_id = str(uuid.uuid4())
    reply = await client.patch(f"/memory/{memory_id}", json={"id": other_id, "importance": 0.6})
    assert reply.status_code == 200, reply.text
    assert reply.json()["memory_id"] == memory_id
    assert (await fetch(client, memory_id))["importance"] == 0.6
    assert not await exists(client, other_id)


async def test_tags_and_metadata_past_the_write_side_limits_are_400_naming_the_field(client):
    """MEMORY_MAX_TAGS (50), MEMORY_MAX_TAG_CHARS (128), MEMORY_MAX_TAG_SEGMENTS (10) and
    MEMORY_MAX_METADATA_BYTES (16 KiB) on create, batch (naming the item) and PATCH; nothing written."""
    big = {"blob": "x" * (16 * 1024)}
    for fields, words in (
        ({"tags": [f"t{i}" for i in range(51)]}, ("tags", "51", "50")),
        ({"tags": ["ok", "y" * 129]}, ("tags[1]", "129", "128")),
        ({"tags": ["a:" * 50_000]}, ("tags[0]",)),
        ({"tags": ["a/b:" * 5 + "c"]}, ("tags[0]", "segments", "10")),
        ({"metadata": big}, ("metadata", "16384")),
    ):
        assert_error(await client.post("/memory", json={"content": "bounded", **fields}), 400, *words)
    items = [{"content": "fine", "tags": ["t"] * 50}, {"content": "fine"}, {"content": "bad", "tags": ["y" * 129]}]
    assert_error(await client.post("/memory/batch", json={"memories": items}), 400, "index 2", "tags[0]")
    assert await memory_count(client) == 0
    memory_id = await store(client, content="bounded", tags=["t"] * 50, metadata={"blob": "x" * 16_000})
    many = [f"t{i}" for i in range(51)]  # distinct: a PATCH drops repeats before counting
    assert_error(await client.patch(f"/memory/{memory_id}", json={"tags": many}), 400, "tags", "51")
    assert_error(await client.patch(f"/memory/{memory_id}", json={"metadata": big}), 400, "metadata")
    stored = await fetch(client, memory_id)
    assert stored["tags"] == ["t"] * 50 and stored["metadata"] == {"blob": "x" * 16_000}


async def test_a_patch_naming_no_field_answers_the_memory_unchanged(client):
    """AutoMem answers {} (or only fields it does not update) with success and
    writes nothing; an unknown id is still 404."""
    memory_id = await store(client, content="as it was", importance=0.3, tags=["kept"])
    original = await fetch(client, memory_id)
    for payload in ({}, {"memory_id": memory_id, "format": "json"}):
        reply = await client.patch(f"/memory/{memory_id}", json=payload)
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert (body["status"], body["memory_id"], body["content_changed"]) == ("success", memory_id, False)
        assert body["memory"]["version"] == original["version"]
    after = await fetch(client, memory_id)
    assert (after["version"], after["updated_at"]) == (original["version"], original["updated_at"])
    assert stable(after) == stable(original)
    assert_error(await client.patch(f"/memory/{NO_SUCH_ID}", json={}), 404, NO_SUCH_ID)


async def test_patch_replaces_metadata_wholesale(client):
    memory_id = await store(client, content="meta", metadata={"key1": "val1", "shared": 1})
    reply = await client.patch(f"/memory/{memory_id}", json={"metadata": {"key2": "val2"}})
    assert reply.status_code == 200, reply.text
    assert (await fetch(client, memory_id))["metadata"] == {"key2": "val2"}


async def test_patch_normalises_tags_and_recomputes_prefixes(client):
    memory_id = await store(client, content="tags", tags=["old:tag"])
    reply = await client.patch(f"/memory/{memory_id}", json={"tags": "Alpha:One, beta ,, gamma/x"})
    assert reply.status_code == 200, reply.text
    memory = await fetch(client, memory_id)
    assert memory["tags"] == ["Alpha:One", "beta", "gamma/x"]
    assert memory["tag_prefixes"] == ["alpha", "alpha:one", "beta", "gamma", "gamma/x"]
    reply = await client.patch(f"/memory/{memory_id}", json={"tags": [" a ", "", "b:c, d", "  "]})
    assert reply.status_code == 200, reply.text
    memory = await fetch(client, memory_id)
    assert memory["tags"] == ["a", "b:c", "d"]
    assert memory["tag_prefixes"] == ["a", "b", "b:c", "d"]


async def test_patch_reports_a_content_change(client):
    memory_id = await store(client, content="first text", type="Context")
    same = await client.patch(f"/memory/{memory_id}", json={"content": "first text"})
    assert same.status_code == 200 and same.json()["content_changed"] is False
    changed = await client.patch(f"/memory/{memory_id}", json={"content": "second text"})
    assert changed.status_code == 200, changed.text
    assert changed.json()["content_changed"] is True and changed.json()["memory_id"] == memory_id
    memory = await fetch(client, memory_id)
    assert (memory["content"], memory["type"]) == ("second text", "Context")


async def test_patch_errors_use_the_envelope_and_change_nothing(client):
    memory_id = await store(client, content="untouched", importance=0.3, metadata={"k": "v"})
    original = stable(await fetch(client, memory_id))
    unknown = await client.patch(f"/memory/{NO_SUCH_ID}", json={"importance": 0.5})
    assert_error(unknown, 404, NO_SUCH_ID)
    # AutoMem answers an id that names no memory, well-formed or not, with 404.
    assert_error(await client.patch("/memory/abc", json={"importance": 0.5}), 404, "abc")
    url = f"/memory/{memory_id}"
    for raw in (b"{not json", b"[1, 2]", b'"text"', b""):
        reply = await client.patch(url, content=raw, headers={"content-type": "application/json"})
        assert_error(reply, 400)
    for payload, field in (
        ({"importance": 2}, "importance"),
        ({"importance": "high"}, "importance"),
        ({"confidence": -0.5}, "confidence"),
        ({"content": ""}, "content"),
        ({"content": "x" * 2001}, "content"),
        ({"metadata": [1]}, "metadata"),
        ({"tags": 5}, "tags"),
        ({"timestamp": "not a time"}, "timestamp"),
    ):
        assert_error(await client.patch(url, json=payload), 400, field)
    assert stable(await fetch(client, memory_id)) == original


# DELETE /memory/{id} --------------------------------------------------------------------------------------


async def test_delete_removes_the_memory_once(client):
    doomed = await store(client, content="doomed")
    kept = await store(client, content="kept")
    reply = await client.delete(f"/memory/{doomed}")
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"status": "success", "memory_id": doomed}
    assert_error(await client.get(f"/memory/{doomed}"), 404)
    assert_error(await client.delete(f"/memory/{doomed}"), 404, doomed)
    assert await exists(client, kept)
    assert await memory_count(client) == 1


async def test_delete_of_a_malformed_or_unknown_id(client):
    """Both name no memory: 404, as AutoMem's non-idempotent delete answers (GET keeps 400 for a non-UUID, as there)."""
    await store(client, content="survivor")
    for missing in ("abc", "nonexistent-memory-id", NO_SUCH_ID):
        reply = await client.delete(f"/memory/{missing}")
        assert_error(reply, 404, missing)
        assert reply.json()["reason"] == "MEMORY_NOT_FOUND"
    assert_error(await client.get("/memory/abc"), 400, "id")
    assert await memory_count(client) == 1


async def test_delete_removes_the_memory_s_edges(client, settings):
    a, b, c = await store_many(client, [{"content": "a"}, {"content": "b"}, {"content": "c"}])
    for target in (b, c):
        reply = await client.post("/associate", json={"memory1_id": a, "memory2_id": target, "type": "RELATES_TO"})
        assert reply.status_code == 201, reply.text
    assert [t for _, t, _ in await edges_from(settings, a)] == sorted([b, c])
    assert (await client.delete(f"/memory/{b}")).status_code == 200
    assert [t for _, t, _ in await edges_from(settings, a)] == [c]


# DELETE /memory/by-tag ------------------------------------------------------------------------------------


async def test_delete_by_tag_is_exact_case_insensitive_and_any_of(client):
    doomed = await store_many(
        client,
        [
            {"content": "lower", "tags": ["foo"]},
            {"content": "upper", "tags": "FOO"},
            {"content": "among others", "tags": ["other", "Foo"]},
        ],
    )
    kept = await store_many(
        client,
        [
            {"content": "hierarchical", "tags": ["foo:bar"]},
            {"content": "longer", "tags": ["food"]},
            {"content": "path", "tags": ["foo/bar"]},
            {"content": "unrelated", "tags": ["bar"]},
            {"content": "untagged"},
        ],
    )
    reply = await client.delete("/memory/by-tag", params={"tags": "Foo"})
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"status": "success", "tags": ["Foo"], "deleted_count": 3}
    for memory_id in doomed:
        assert not await exists(client, memory_id)
    for memory_id in kept:
        assert await exists(client, memory_id)
    assert await memory_count(client) == len(kept)


async def test_delete_by_tag_takes_repeated_tags(client):
    kept = await store(client, content="gamma", tags=["gamma"])
    await store_many(client, [{"content": "a", "tags": ["alpha"]}, {"content": "b", "tags": ["beta", "x"]}])
    reply = await client.delete("/memory/by-tag", params=[("tags", "alpha"), ("tags", "BETA")])
    assert reply.status_code == 200, reply.text
    assert reply.json()["deleted_count"] == 2 and reply.json()["tags"] == ["alpha", "BETA"]
    assert await memory_count(client) == 1 and await exists(client, kept)
    none = await client.delete("/memory/by-tag", params={"tags": "alpha"})
    assert none.status_code == 200 and none.json()["deleted_count"] == 0


async def test_delete_by_tag_needs_tags(client):
    await store(client, content="safe", tags=["safe"])
    assert_error(await client.delete("/memory/by-tag"), 400, "tags")
    assert_error(await client.delete("/memory/by-tag", params={"tags": ""}), 400, "tags")
    assert await memory_count(client) == 1


async def test_delete_by_tag_pages_past_200(client):
    # 500 is also the largest batch accepted.
    ids = await store_many(client, [{"content": f"bulk {i}", "tags": ["Bulk"]} for i in range(500)])
    assert len(set(ids)) == 500
    kept = await store(client, content="not bulk", tags=["bulky"])
    assert await memory_count(client) == 501
    reply = await client.delete("/memory/by-tag", params={"tags": "bulk"})
    assert reply.status_code == 200, reply.text
    assert reply.json()["deleted_count"] == 500
    assert await memory_count(client) == 1 and await exists(client, kept)
    assert not await exists(client, ids[0]) and not await exists(client, ids[-1])


# POST /associate ------------------------------------------------------------------------------------------


async def test_associate_creates_a_typed_edge(client, settings):
    a, b = await store_many(client, [{"content": "a"}, {"content": "b"}])
    reply = await client.post("/associate", json={"memory1_id": a, "memory2_id": b, "type": "LEADS_TO"})
    assert reply.status_code == 201, reply.text
    body = reply.json()
    assert body["status"] == "success"
    assert (body["memory1_id"], body["memory2_id"], body["relation_type"]) == (a, b, "LEADS_TO")
    assert body["strength"] == 0.5
    [(kind, target, properties)] = await edges_from(settings, a)
    assert (kind, target, properties["strength"]) == ("LEADS_TO", b, 0.5)
    assert await edges_from(settings, b) == []


async def test_every_authorable_type_is_accepted_in_lowercase(client, settings):
    a, b = await store_many(client, [{"content": "a"}, {"content": "b"}])
    for name in AUTHORABLE:
        sent = name.lower()
        reply = await client.post("/associate", json={"memory1_id": a, "memory2_id": b, "type": sent})
        assert reply.status_code == 201, (sent, reply.text)
        assert reply.json()["relation_type"] == name
    assert [kind for kind, _, _ in await edges_from(settings, a)] == sorted(AUTHORABLE)


async def test_system_and_unknown_relation_types_are_400(client, settings):
    a, b = await store_many(client, [{"content": "a"}, {"content": "b"}])
    for kind in ("SIMILAR_TO", "PRECEDED_BY", "DISCOVERED", "similar_to", "FRIENDS_WITH", " ", 7):
        payload = {"memory1_id": a, "memory2_id": b, "type": kind}
        assert_error(await client.post("/associate", json=payload), 400, "type")
    assert await edges_from(settings, a) == []


async def test_type_and_strength_default_to_relates_to_and_half(client, settings):
    """AutoMem's defaults: no (or an empty, or a null) type is RELATES_TO, no strength 0.5,
    in the single form and in each item of a batch."""
    a, b, c, d = await store_many(client, [{"content": n} for n in "abcd"])
    reply = await client.post("/associate", json={"memory1_id": a, "memory2_id": b})
    assert reply.status_code == 201, reply.text
    assert (reply.json()["relation_type"], reply.json()["strength"]) == ("RELATES_TO", 0.5)
    items = [
        {"memory1_id": a, "memory2_id": c},
        {"memory1_id": a, "memory2_id": d, "type": None, "strength": None},
        {"memory1_id": b, "memory2_id": c, "type": ""},
    ]
    reply = await client.post("/associate", json={"associations": items})
    assert reply.status_code == 201, reply.text
    assert [(s["relation_type"], s["strength"]) for s in reply.json()["succeeded"]] == [("RELATES_TO", 0.5)] * 3
    assert sorted((k, t, p["strength"]) for k, t, p in await edges_from(settings, a)) == sorted(
        [("RELATES_TO", b, 0.5), ("RELATES_TO", c, 0.5), ("RELATES_TO", d, 0.5)]
    )
    assert [(k, t) for k, t, _ in await edges_from(settings, b)] == [("RELATES_TO", c)]


async def test_strength_is_0_to_1(client, settings):
    a, b, c, d = await store_many(client, [{"content": n} for n in "abcd"])
    for strength in (1.5, -0.1, "strong", True):
        payload = {"memory1_id": a, "memory2_id": b, "type": "RELATES_TO", "strength": strength}
        assert_error(await client.post("/associate", json=payload), 400, "strength")
    assert await edges_from(settings, a) == []
    for target, strength in ((b, 0), (c, 1), (d, 0.8)):
        payload = {"memory1_id": a, "memory2_id": target, "type": "RELATES_TO", "strength": strength}
        reply = await client.post("/associate", json=payload)
        assert reply.status_code == 201 and reply.json()["strength"] == strength, reply.text
    assert sorted((t, p["strength"]) for _, t, p in await edges_from(settings, a)) == sorted(
        [(b, 0.0), (c, 1.0), (d, 0.8)]
    )


async def test_each_type_keeps_its_own_properties(client, settings):
    a, b = await store_many(client, [{"content": "PostgreSQL"}, {"content": "MongoDB"}])
    payload = {
        "memory1_id": a,
        "memory2_id": b,
        "type": "PREFERS_OVER",
        "strength": 0.9,
        "reason": "ACID",
        "context": "payments",
        "unrelated": "dropped",
        "pattern_type": "not this type's",
    }
    reply = await client.post("/associate", json=payload)
    assert reply.status_code == 201, reply.text
    assert reply.json()["properties"] == {"reason": "ACID", "context": "payments"}
    # AutoMem names the type's properties beside strength too.
    assert (reply.json()["reason"], reply.json()["context"]) == ("ACID", "payments")
    assert "unrelated" not in reply.json() and "pattern_type" not in reply.json()
    [(kind, target, properties)] = await edges_from(settings, a)
    assert (kind, target) == ("PREFERS_OVER", b)
    assert properties["reason"] == "ACID" and properties["context"] == "payments"
    assert "unrelated" not in properties and "pattern_type" not in properties


async def test_associate_needs_two_distinct_stored_memories(client, settings):
    [a] = await store_many(client, [{"content": "alone"}])
    payload = {"memory1_id": a, "memory2_id": NO_SUCH_ID, "type": "RELATES_TO"}
    assert_error(await client.post("/associate", json=payload), 404, "memory2_id")
    payload = {"memory1_id": NO_SUCH_ID, "memory2_id": a, "type": "RELATES_TO"}
    assert_error(await client.post("/associate", json=payload), 404, "memory1_id")
    payload = {"memory1_id": a, "memory2_id": a, "type": "RELATES_TO"}
    assert_error(await client.post("/associate", json=payload), 400, "memory")
    assert_error(await client.post("/associate", json={"memory2_id": a, "type": "RELATES_TO"}), 400, "memory1_id")
    # An id that is no UUID names no memory: 404, as in AutoMem (a bad type is still the 400).
    payload = {"memory1_id": "abc", "memory2_id": a, "type": "RELATES_TO"}
    assert_error(await client.post("/associate", json=payload), 404, "abc")
    payload = {"memory1_id": "abc", "memory2_id": a, "type": "FRIENDS_WITH"}
    assert_error(await client.post("/associate", json=payload), 400, "type")
    for raw in (b"{not json", b"[1, 2]"):
        reply = await client.post("/associate", content=raw, headers={"content-type": "application/json"})
        assert_error(reply, 400)
    assert await edges_from(settings, a) == []


async def test_a_batch_of_associations_all_created_is_201(client, settings):
    a, b, c = await store_many(client, [{"content": n} for n in "abc"])
    items = [
        {"memory1_id": a, "memory2_id": b, "type": "RELATES_TO"},
        {"memory1_id": a, "memory2_id": c, "type": "Part_Of", "strength": 0.7, "role": "member"},
    ]
    reply = await client.post("/associate", json={"associations": items})
    assert reply.status_code == 201, reply.text
    body = reply.json()
    assert body["status"] == "success"
    assert (body["created_count"], body["failed_count"], body["failed"]) == (2, 0, [])
    assert [(s["memory2_id"], s["relation_type"], s["strength"]) for s in body["succeeded"]] == [
        (b, "RELATES_TO", 0.5),
        (c, "PART_OF", 0.7),
    ]
    edges = await edges_from(settings, a)
    assert [(k, t) for k, t, _ in edges] == sorted([("RELATES_TO", b), ("PART_OF", c)])
    assert {k: p.get("role") for k, _, p in edges} == {"PART_OF": "member", "RELATES_TO": None}


async def test_a_batch_of_associations_with_failures_is_207(client, settings):
    a, b, c = await store_many(client, [{"content": n} for n in "abc"])
    items = [
        {"memory1_id": a, "memory2_id": b, "type": "RELATES_TO"},
        {"memory1_id": a, "memory2_id": c, "type": "SIMILAR_TO"},
        {"memory1_id": a, "memory2_id": NO_SUCH_ID, "type": "LEADS_TO"},
        {"memory1_id": b, "memory2_id": c, "type": "REINFORCES"},
        {"memory1_id": a, "memory2_id": c, "type": "LEADS_TO", "strength": 1.5},
        {"memory1_id": c, "memory2_id": c, "type": "LEADS_TO"},
    ]
    reply = await client.post("/associate", json={"associations": items})
    assert reply.status_code == 207, reply.text
    body = reply.json()
    assert body["status"] == "partial_success"
    assert (body["created_count"], body["failed_count"]) == (2, 4)
    assert [(s["memory1_id"], s["memory2_id"]) for s in body["succeeded"]] == [(a, b), (b, c)]
    assert [f["index"] for f in body["failed"]] == [1, 2, 4, 5]
    reasons = [f["reason"] for f in body["failed"]]
    for reason, word in zip(reasons, ("type", "memory2_id", "strength", "memory"), strict=True):
        assert word in reason, (word, reason)
    assert [(k, t) for k, t, _ in await edges_from(settings, a)] == [("RELATES_TO", b)]
    assert [(k, t) for k, t, _ in await edges_from(settings, b)] == [("REINFORCES", c)]
    assert await edges_from(settings, c) == []


# Supersede mode -------------------------------------------------------------------------------------------


async def test_supersede_invalidates_the_old_memory_by_default(client, settings):
    old_id = await store(client, content="Deploys run on Jenkins", type="Context", metadata={"source": "wiki"})
    before = datetime.now(UTC)
    reply = await client.post(
        "/memory",
        json={"content": "Deploys run on GitHub Actions", "supersedes_memory_id": old_id, "supersede_reason": "moved"},
    )
    after = datetime.now(UTC)
    assert reply.status_code == 201, reply.text
    new_id = reply.json()["memory_id"]
    assert reply.json().keys() >= CREATED_KEYS, CREATED_KEYS - reply.json().keys()
    assert new_id != old_id and reply.json()["status"] == "success"
    old = await fetch(client, old_id)
    assert_between(old["t_invalid"], before, after)
    assert_utc(old["t_invalid"])
    assert old["metadata"]["supersede_reason"] == "moved" and old["metadata"]["source"] == "wiki"
    assert old["content"] == "Deploys run on Jenkins"
    new = await fetch(client, new_id)
    assert new["content"] == "Deploys run on GitHub Actions" and new["t_invalid"] is None
    [(kind, target, _)] = await edges_from(settings, old_id)
    assert (kind, target) == ("INVALIDATED_BY", new_id)
    assert await memory_count(client) == 2


async def test_supersede_can_record_an_evolution(client, settings):
    old_id = await store(client, content="Team uses REST")
    payload = {"content": "Team uses gRPC inside", "supersedes_memory_id": old_id, "supersede_relation": "EVOLVED_INTO"}
    reply = await client.post("/memory", json=payload)
    assert reply.status_code == 201, reply.text
    assert (await fetch(client, old_id))["t_invalid"] is not None
    assert [(k, t) for k, t, _ in await edges_from(settings, old_id)] == [("EVOLVED_INTO", reply.json()["memory_id"])]


async def test_supersede_with_a_bad_relation_stores_nothing(client, settings):
    old_id = await store(client, content="old fact")
    for relation in ("RELATES_TO", "REPLACED_BY"):
        payload = {"content": "new fact", "supersedes_memory_id": old_id, "supersede_relation": relation}
        assert_error(await client.post("/memory", json=payload), 400, "supersede_relation")
    bad_replacement = {"content": "", "supersedes_memory_id": old_id}
    assert_error(await client.post("/memory", json=bad_replacement), 400, "content")
    assert await memory_count(client) == 1
    old = await fetch(client, old_id)
    assert old["t_invalid"] is None and "supersede_reason" not in old["metadata"]
    assert await edges_from(settings, old_id) == []


async def test_supersede_of_an_unknown_memory_is_404_and_stores_nothing(client):
    await store(client, content="bystander")
    payload = {"content": "replacement", "supersedes_memory_id": NO_SUCH_ID, "supersede_reason": "why"}
    assert_error(await client.post("/memory", json=payload), 404, NO_SUCH_ID)
    assert await memory_count(client) == 1


# Idempotency-Key ------------------------------------------------------------------------------------------


async def test_a_repeated_create_with_the_same_key_is_replayed(client):
    payload = {"content": "exactly once", "tags": ["idem"]}
    first = await client.post("/memory", json=payload, headers={"Idempotency-Key": "key-1"})
    second = await client.post("/memory", json=payload, headers={"Idempotency-Key": "key-1"})
    assert first.status_code == second.status_code == 201, (first.text, second.text)
    assert second.json()["memory_id"] == first.json()["memory_id"]
    assert "idempotent-replayed" not in first.headers
    assert second.headers.get("Idempotent-Replayed") == "true"
    assert await memory_count(client) == 1
    other = await client.post("/memory", json=payload, headers={"Idempotency-Key": "key-2"})
    assert other.status_code == 201 and other.json()["memory_id"] != first.json()["memory_id"]
    assert await memory_count(client) == 2


async def test_a_key_reused_for_another_create_is_409(client):
    first = await client.post("/memory", json={"content": "original"}, headers={"Idempotency-Key": "key-1"})
    assert first.status_code == 201, first.text
    reused = await client.post("/memory", json={"content": "different"}, headers={"Idempotency-Key": "key-1"})
    assert_error(reused, 409, "idempotency")
    assert await memory_count(client) == 1
    assert (await fetch(client, first.json()["memory_id"]))["content"] == "original"


async def test_a_repeated_batch_with_the_same_key_is_replayed(client):
    payload = {"memories": [{"content": "one"}, {"content": "two"}, {"content": "three"}]}
    first = await client.post("/memory/batch", json=payload, headers={"Idempotency-Key": "batch-1"})
    second = await client.post("/memory/batch", json=payload, headers={"Idempotency-Key": "batch-1"})
    assert first.status_code == second.status_code == 201, (first.text, second.text)
    assert second.json()["memory_ids"] == first.json()["memory_ids"]
    assert second.json()["stored"] == 3
    assert "idempotent-replayed" not in first.headers
    assert second.headers.get("Idempotent-Replayed") == "true"
    assert await memory_count(client) == 3
    changed = {"memories": [{"content": "one"}, {"content": "two"}]}
    reused = await client.post("/memory/batch", json=changed, headers={"Idempotency-Key": "batch-1"})
    assert_error(reused, 409, "idempotency")
    assert await memory_count(client) == 3


async def test_concurrent_creates_with_one_key_store_one_memory(client):
    payload = {"content": "raced", "type": "Context"}
    replies = await asyncio.gather(
        *(client.post("/memory", json=payload, headers={"Idempotency-Key": "race"}) for _ in range(5))
    )
    assert [r.status_code for r in replies] == [201] * 5, [r.text for r in replies]
    assert len({r.json()["memory_id"] for r in replies}) == 1
    assert [r.headers.get("Idempotent-Replayed") for r in replies].count("true") == 4
    assert await memory_count(client) == 1


async def test_a_repeated_supersede_with_the_same_key_is_replayed(client):
    old_id = await store(client, content="Office is in Berlin")
    payload = {"content": "Office is in Hamburg", "supersedes_memory_id": old_id}
    first = await client.post("/memory", json=payload, headers={"Idempotency-Key": "move"})
    assert first.status_code == 201, first.text
    second = await client.post("/memory", json=payload, headers={"Idempotency-Key": "move"})
    assert second.status_code == 201, second.text
    assert second.json()["memory_id"] == first.json()["memory_id"]
    assert second.headers.get("Idempotent-Replayed") == "true"
    assert await memory_count(client) == 2


async def test_get_lists_relations_in_both_directions(client):
    a = await store(client, content="We chose PostgreSQL")
    b = await store(client, content="MongoDB was the alternative")
    reply = await client.post(
        "/associate", json={"memory1_id": a, "memory2_id": b, "type": "PREFERS_OVER", "strength": 0.8, "reason": "ACID"}
    )
    assert reply.status_code == 201, reply.text
    [outgoing] = (await fetch(client, a))["relations"]
    assert (outgoing["memory_id"], outgoing["type"], outgoing["direction"]) == (b, "PREFERS_OVER", "outgoing")
    assert outgoing["strength"] == 0.8 and outgoing["properties"] == {"reason": "ACID"}
    [incoming] = (await fetch(client, b))["relations"]
    assert (incoming["memory_id"], incoming["direction"]) == (a, "incoming")


async def test_a_wrong_strength_fails_only_its_item_in_a_batch(client):
    a = await store(client, content="first")
    b = await store(client, content="second")
    reply = await client.post(
        "/associate",
        json={
            "associations": [
                {"memory1_id": a, "memory2_id": b, "type": "RELATES_TO"},
                {"memory1_id": a, "memory2_id": b, "type": "LEADS_TO", "strength": "strong"},
            ]
        },
    )
    assert reply.status_code == 207, reply.text
    body = reply.json()
    assert body["created_count"] == 1 and body["failed"][0]["index"] == 1
    assert "strength" in body["failed"][0]["reason"]
