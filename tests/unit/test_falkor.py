"""The pure parts of the FalkorDB adapter: Memory <-> node properties, retry rules, FALKORDB_HOST."""

from __future__ import annotations

import base64
import calendar
import json
import struct

import pytest
import redis.exceptions as redis_errors

from services.core.adapters.falkor.cluster import seeds
from services.core.adapters.falkor.failures import is_read, not_sent, retryable, timed_out
from services.core.adapters.falkor.rows import decode_embedding, encode_embedding, memory_to_row, row_to_memory
from services.core.domain.text_policy import rarest_within

TIME_FIELDS = ("timestamp", "t_valid", "t_invalid", "updated_at", "last_accessed", "recorded_at", "enriched_at")


def test_full_memory_round_trips(full_memory):
    assert row_to_memory(memory_to_row(full_memory)) == full_memory


def test_round_trip_keeps_types(full_memory):
    back = row_to_memory(memory_to_row(full_memory))
    assert isinstance(back.metadata["count"], int)
    assert back.metadata["big"] == 9007199254740993
    assert back.metadata["nested"]["deep"]["items"] == [1, "two", {"three": 3}]
    assert back.embedding == full_memory.embedding
    assert back.relevance_score == pytest.approx(0.42)
    for name in TIME_FIELDS:
        assert getattr(back, name) == getattr(full_memory, name), name
        assert getattr(back, name).microsecond == getattr(full_memory, name).microsecond


def test_row_holds_graph_friendly_values(full_memory):
    row = memory_to_row(full_memory)
    # Times are epoch microseconds.
    expected = calendar.timegm((2024, 1, 15, 10, 30, 0)) * 1_000_000 + 123456
    assert row["timestamp"] == expected
    assert all(isinstance(row[name], int) for name in TIME_FIELDS)
    # Metadata is JSON text (FalkorDB has no map properties).
    assert isinstance(row["metadata"], str)
    assert json.loads(row["metadata"]) == full_memory.metadata
    # The embedding is base64 float32.
    assert isinstance(row["embedding"], str)
    assert len(base64.b64decode(row["embedding"])) == 4 * len(full_memory.embedding)
    assert row["tags"] == full_memory.tags
    assert row["archived"] is True
    assert row["version"] == 7


LEGACY = {"label": "UNVERIFIED", "confidence": 0.56, "rationale": "source trust 0.70"}


def test_factuality_is_its_own_property_not_metadata(full_memory):
    row = memory_to_row(full_memory)
    assert json.loads(row["factuality"]) == full_memory.factuality
    assert "factuality" not in json.loads(row["metadata"])


def test_a_record_an_earlier_release_enriched_reads_with_factuality_lifted_out(full_memory, minimal_memory):
    """Before ensure_schema's migration reaches it, an old record reads as the
    new shape, so whatever writes it back writes the new shape."""
    row = memory_to_row(full_memory)
    del row["factuality"]
    row["metadata"] = json.dumps({"source": "slack", "factuality": LEGACY})
    back = row_to_memory(row)
    assert back.factuality == LEGACY and back.metadata == {"source": "slack"}
    # Not enriched, or not enrichment's shape: the client's own key, left where it is.
    mine = {"factuality": {"label": "FACT", "confidence": 1, "rationale": "I say so", "by": "me"}}
    row["metadata"] = json.dumps(mine)
    assert row_to_memory(row).metadata == mine and row_to_memory(row).factuality is None
    plain = memory_to_row(minimal_memory)
    plain["metadata"] = json.dumps({"factuality": LEGACY})
    assert row_to_memory(plain).metadata == {"factuality": LEGACY} and row_to_memory(plain).factuality is None
    # A record that has its own factuality keeps the client's metadata.factuality as sent.
    row = memory_to_row(full_memory)
    row["metadata"] = json.dumps({"factuality": LEGACY})
    assert row_to_memory(row).metadata == {"factuality": LEGACY}
    assert row_to_memory(row).factuality == full_memory.factuality


def test_keep_nulls_lets_an_update_remove_cleared_fields(minimal_memory):
    row = memory_to_row(minimal_memory, keep_nulls=True)
    for name in ("embedding", "t_invalid", "enriched_at", "relevance_score", "superseded_at"):
        assert name in row and row[name] is None, name
    assert row["content"] == minimal_memory.content


def test_none_fields_are_left_out(minimal_memory):
    row = memory_to_row(minimal_memory)
    for name in ("embedding", "t_invalid", "enriched_at", "relevance_score"):
        assert name not in row, name
    assert all(value is not None for value in row.values())
    assert row_to_memory(row) == minimal_memory


def test_row_does_not_share_lists_with_the_memory(full_memory):
    row = memory_to_row(full_memory)
    row["tags"].append("extra")
    assert "extra" not in full_memory.tags


def test_encode_embedding_is_little_endian_float32():
    text = encode_embedding([1.0, -2.5])
    assert base64.b64decode(text) == struct.pack("<2f", 1.0, -2.5)


def test_embedding_round_trip_rounds_to_float32():
    back = decode_embedding(encode_embedding([0.1, -0.3, 0.5, 1e-8]))
    expected = list(struct.unpack("<4f", struct.pack("<4f", 0.1, -0.3, 0.5, 1e-8)))
    assert back == expected
    assert back == pytest.approx([0.1, -0.3, 0.5, 1e-8], rel=1e-6)
    assert back[0] != 0.1  # float32, not float64


@pytest.mark.parametrize("text", [None, ""])
def test_decode_of_nothing_is_none(text):
    assert decode_embedding(text) is None


def test_encode_of_none_is_none():
    assert encode_embedding(None) is None


@pytest.mark.parametrize(
    "error, retry",
    [
        (redis_errors.BusyLoadingError("Redis is loading the dataset in memory"), True),
        (redis_errors.ResponseError("LOADING Redis is loading the dataset in memory"), True),
        (redis_errors.ConnectionError("refused"), True),
        (redis_errors.TimeoutError("Timeout connecting to server"), True),
        # A timeout once the query was sent is never retried: it would run (or write) again.
        (redis_errors.TimeoutError("Timeout reading from socket"), False),
        (redis_errors.TimeoutError("slow"), False),
        (redis_errors.ResponseError("Query timed out"), False),
        (redis_errors.ResponseError("errMsg: Invalid input"), False),
        (ValueError("bug"), False),
    ],
)
def test_only_transient_errors_are_retried(error, retry):
    assert retryable(error) is retry


@pytest.mark.parametrize(
    "error, unsent",
    [
        (redis_errors.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused."), True),
        (redis_errors.ConnectionError("Error connecting to 127.0.0.1:6379. boom."), True),
        (redis_errors.TimeoutError("Timeout connecting to server"), True),
        (redis_errors.BusyLoadingError("Redis is loading the dataset in memory"), True),
        # The command went out: a write may have been applied, so it is not sent blindly again.
        (redis_errors.ConnectionError("Connection closed by server."), False),
        (redis_errors.ConnectionError("Error while reading from 127.0.0.1:6379 : (104, 'reset')"), False),
        (redis_errors.TimeoutError("Timeout reading from socket"), False),
    ],
)
def test_a_write_is_resent_only_when_it_never_reached_the_server(error, unsent):
    assert not_sent(error) is unsent


@pytest.mark.parametrize(
    "cypher, read",
    [
        ("MATCH (m:Memory) RETURN m.id", True),
        ("CALL db.idx.fulltext.queryNodes('Memory', $q) YIELD node RETURN node", True),
        ("UNWIND $rows AS r CREATE (m:Memory) SET m = r.node", False),
        ("MATCH (m) WHERE m.id = $id set m.x = 1", False),
        ("MATCH (x:Outbox {id: $id}) DELETE x", False),
        ("MERGE (k:IdempotencyKey {key: $k})", False),
    ],
)
def test_a_query_without_a_write_clause_counts_as_a_read(cypher, read):
    assert is_read(cypher) is read


@pytest.mark.parametrize(
    "error, timeout",
    [
        (redis_errors.ResponseError("Query timed out"), True),
        (redis_errors.TimeoutError("Timeout reading from socket"), True),
        (redis_errors.TimeoutError("Timeout connecting to server"), False),
        (redis_errors.ResponseError("errMsg: Invalid input"), False),
        (redis_errors.ConnectionError("refused"), False),
    ],
)
def test_timed_out_tells_a_time_limit_from_other_failures(error, timeout):
    assert timed_out(error) is timeout


def test_rarest_within_takes_the_rarest_words_while_their_matches_fit():
    df = {"rare": 3, "mid": 40, "common": 900, "absent": 0}
    assert rarest_within(["common", "mid", "rare", "rare", "absent"], df, 50) == ["absent", "rare", "mid"]
    assert rarest_within(["common", "mid"], df, 10) == ["mid"]  # the rarest always
    assert rarest_within(["common", "mid", "rare"], df, 10_000) == ["rare", "mid", "common"]


@pytest.mark.parametrize(
    ("host", "nodes"),
    [
        ("falkordb", [("falkordb", 6379)]),
        ("10.0.0.5:7000", [("10.0.0.5", 7000)]),
        (
            "falkordb-0.falkordb, falkordb-1.falkordb:7001,,falkordb-2.falkordb",
            [("falkordb-0.falkordb", 6379), ("falkordb-1.falkordb", 7001), ("falkordb-2.falkordb", 6379)],
        ),
    ],
)
def test_falkordb_host_names_one_node_or_several(host, nodes):
    assert seeds(host, 6379) == nodes


def test_falkordb_host_must_name_a_node():
    with pytest.raises(ValueError, match="FALKORDB_HOST"):
        seeds(" , ", 6379)
