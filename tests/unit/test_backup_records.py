"""The records a backup writes (services/consolidate/backup.py), pure."""

from __future__ import annotations

import base64
import dataclasses
from array import array
from datetime import UTC, datetime

from services.consolidate.backup import backup_name, edge_record, encode_embedding, memory_record, node_record
from services.core.domain.model import Memory
from services.core.ports import ExportedEdge

AT = datetime(2026, 3, 18, 15, 30, 0, 123456, tzinfo=UTC)


def test_a_memory_record_holds_every_field(full_memory):
    record = memory_record(full_memory)
    assert set(record) == {f.name for f in dataclasses.fields(Memory)} | {"embedding_dimension"}
    assert record["t_invalid"] == "2030-12-31T23:59:59.999999+00:00"
    assert record["recorded_at"] == "2024-01-15T10:30:01.654321+00:00"
    assert record["metadata"] == full_memory.metadata and record["version"] == 7 and record["archived"] is True
    vector = array("f")
    vector.frombytes(base64.b64decode(record["embedding"]))
    assert vector.tolist() == full_memory.embedding and record["embedding_dimension"] == 4


def test_optional_fields_stay_null(minimal_memory):
    record = memory_record(minimal_memory)
    assert record["embedding"] is None and record["embedding_dimension"] is None
    assert record["t_invalid"] is None and record["superseded_at"] is None
    assert encode_embedding(None) is None


def test_edges_and_side_nodes():
    edge = ExportedEdge("m1", "MENTIONS", "Entity", "entity:tools:docker", None, AT, {"x": 1})
    assert edge_record(edge) == {
        "source_id": "m1", "type": "MENTIONS", "target_label": "Entity", "target": "entity:tools:docker",
        "strength": None, "created_at": "2026-03-18T15:30:00.123456+00:00", "properties": {"x": 1},
    }  # fmt: skip
    pattern = {"tenant": "acme", "key": "Decision|entity:tools:docker", "members": 3, "updated_at": 1_000_000}
    assert node_record(pattern) == {
        "key": "Decision|entity:tools:docker", "members": 3, "updated_at": "1970-01-01T00:00:01+00:00",
    }  # fmt: skip


def test_backup_names_are_safe_and_sortable():
    assert backup_name("acme", AT) == "acme-20260318T153000123456Z.json"
    assert backup_name("../etc/passwd", AT).startswith("___etc_passwd-")
    assert backup_name("", AT).startswith("_-")
