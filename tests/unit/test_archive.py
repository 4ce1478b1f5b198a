"""The backup archive's format and a restore's rules (services/core/domain/archive.py), pure."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta

import pytest

from services.core.domain.archive import (
    VERSION,
    ArchiveEdge,
    ArchiveEncoder,
    ArchiveError,
    ArchiveNode,
    Header,
    Manifest,
)
from services.core.domain.archive_decoder import ArchiveDecoder
from services.core.domain.archive_names import archive_name, check_name, to_prune
from services.core.domain.archive_restore import check_tenants, identity, is_newer
from services.core.domain.errors import InvalidArgument, PermissionDenied

AT = datetime(2026, 3, 18, 15, 30, 0, 123456, tzinfo=UTC)
NODES = [
    ArchiveNode(0, ("Memory",), {"id": "m1", "tenant": "acme", "content": "é ✓", "version": 2, "t_invalid": None}),
    ArchiveNode(4, ("Entity",), {"tag": "entity:tools:docker", "tenant": "acme", "weights": [0.5, 1.0]}),
]
EDGES = [ArchiveEdge("MENTIONS", 0, 4, {"created_at": 1_000_000, "strength": 0.25})]


def encoded(header: Header | None = None) -> list[bytes]:
    encoder = ArchiveEncoder(header or Header(created_at="2026-03-18T15:30:00Z", scope="tenant", tenant="acme"))
    lines = [encoder.header_line(), *map(encoder.node_line, NODES), *map(encoder.edge_line, EDGES)]
    return [*lines, encoder.manifest_line()]


def decode(lines: list[bytes]) -> tuple[list, Manifest]:
    decoder = ArchiveDecoder()
    records = [decoder.feed(line) for line in lines]
    return records, decoder.finish()


def test_lines_round_trip_with_a_manifest_of_counts_and_checksum():
    lines = encoded()
    records, manifest = decode(lines)
    assert records[0] == Header("2026-03-18T15:30:00Z", "tenant", "acme", VERSION, "")
    assert records[1:3] == NODES and records[3:4] == EDGES
    assert manifest.nodes == {"Memory": 1, "Entity": 1} and manifest.edges == {"MENTIONS": 1}
    assert manifest.tenants == {"acme": 2} and manifest.lines == 4 and manifest.memories == 1
    assert manifest.sha256 == hashlib.sha256(b"".join(lines[:-1])).hexdigest()
    assert all(line.endswith(b"\n") and line.count(b"\n") == 1 for line in lines)  # JSON Lines


def test_a_changed_line_fails_the_checksum():
    lines = encoded()
    lines[1] = lines[1].replace(b'"version":2', b'"version":3')
    with pytest.raises(ArchiveError) as refused:
        decode(lines)
    assert refused.value.reason == "ARCHIVE_CHECKSUM_MISMATCH" and refused.value.field == "archive"


def test_another_version_or_format_is_refused_by_name():
    lines = encoded(Header(created_at="x", scope="tenant", tenant="acme", version=1))
    with pytest.raises(ArchiveError) as refused:
        decode(lines)
    assert refused.value.reason == "ARCHIVE_VERSION_UNSUPPORTED" and "version 1" in refused.value.message
    with pytest.raises(ArchiveError) as refused:
        decode([b'{"format": "memgrid-backup-old"}\n'])
    assert refused.value.reason == "ARCHIVE_NOT_MEMGRID"


def test_a_missing_manifest_is_a_truncated_archive():
    decoder = ArchiveDecoder()
    for line in encoded()[:-1]:
        decoder.feed(line)
    with pytest.raises(ArchiveError) as refused:
        decoder.finish()
    assert refused.value.reason == "ARCHIVE_TRUNCATED"
    with pytest.raises(ArchiveError) as refused:
        ArchiveDecoder().finish()
    assert refused.value.reason == "ARCHIVE_EMPTY"


@pytest.mark.parametrize(
    "line, what",
    [
        (b"not json\n", "is not JSON"),
        (b'{"node": 9, "labels": ["Memory"], "properties": {"id": "x"}}\n', "without a tenant"),
        (b'{"node": 9, "labels": ["Memory) DETACH DELETE (n"], "properties": {"tenant": "a"}}\n', "no valid labels"),
        (b'{"edge": "X", "from": 0, "to": 77, "properties": {}}\n', "ends are not in the archive"),
        (b'{"edge": "X]->() DELETE", "from": 0, "to": 4, "properties": {}}\n', "no valid edge type"),
        (b'{"node": 0, "labels": ["Memory"], "properties": {"tenant": "a"}}\n', "repeated node number"),
        (b'{"other": 1, "properties": {}}\n', "neither a node"),
    ],
)
def test_a_malformed_line_is_refused_naming_its_number(line, what):
    lines = encoded()
    with pytest.raises(ArchiveError) as refused:
        decode([*lines[:3], line, *lines[3:]])
    assert refused.value.reason == "ARCHIVE_CORRUPT" and "line 4" in refused.value.message
    assert what in refused.value.message


def test_names_are_safe_sortable_and_checked():
    assert archive_name("acme", AT) == "acme-20260318T153000123456Z.jsonl.gz"
    assert archive_name(None, AT).startswith("@all-")
    assert archive_name("../etc/passwd", AT).startswith("___etc_passwd-")
    assert check_name("acme-20260318T153000123456Z.jsonl.gz")
    for bad in ("../acme-20260318T153000123456Z.jsonl.gz", "acme.json", "a/b-20260318T153000123456Z.jsonl.gz", ""):
        with pytest.raises(InvalidArgument) as refused:
            check_name(bad)
        assert refused.value.field == "name"


def test_retention_keeps_the_newest_of_each_tenant():
    names = [archive_name(t, AT + timedelta(hours=h)) for h, t in enumerate(["a", "a", "b", "a", None, None])]
    assert to_prune(names, 2) == [names[0]]
    assert to_prune(names, 1) == sorted([names[0], names[1], names[4]])
    assert to_prune(names, 0) == [] and to_prune([*names, "notes.txt"], 5) == []


def test_identity_and_which_version_is_newer():
    assert identity(NODES[0]) == ("id", "m1") and identity(NODES[1]) == ("tag", "entity:tools:docker")
    assert identity(ArchiveNode(1, ("AuditCounter",), {"tenant": "a", "seq": 3})) is None
    assert is_newer({"version": 3}, {"version": 2}) and not is_newer({"version": 2}, {"version": 2})
    assert is_newer({"version": 2, "updated_at": 9}, {"version": 2, "updated_at": 8})
    assert not is_newer({"version": 1, "updated_at": 99}, {"version": 2, "updated_at": 1})
    assert is_newer({"seq": 10}, {"seq": 4}) and not is_newer({}, {})


def test_a_caller_restores_only_its_own_tenant_unless_admin():
    check_tenants({"acme"}, "acme", every_tenant=False)
    check_tenants({"acme", "other"}, "acme", every_tenant=True)
    with pytest.raises(PermissionDenied) as refused:
        check_tenants({"acme", "other"}, "acme", every_tenant=False)
    assert refused.value.reason == "RESTORE_OTHER_TENANT" and "'other'" in refused.value.message


def test_the_header_line_names_format_and_version():
    header = json.loads(encoded()[0])
    assert header["format"] == "memgrid-backup" and header["version"] == VERSION and header["scope"] == "tenant"


def test_an_archive_signed_with_a_key_is_told_from_unsigned_and_foreign_ones():
    from services.core.domain.archive import signature_state

    key, other = b"k" * 32, b"o" * 32
    encoder = ArchiveEncoder(Header(created_at="x", scope="tenant", tenant="acme"))
    lines = [encoder.header_line(), *map(encoder.node_line, NODES), encoder.manifest_line(key)]
    decoder = ArchiveDecoder()
    for line in lines:
        decoder.feed(line)
    manifest = decoder.finish()
    assert manifest.bytes == sum(len(x) for x in lines[:-1])
    assert signature_state([other, key], manifest, decoder.signature) == "signed"  # a previous key verifies too
    assert signature_state([other], manifest, decoder.signature) == "foreign"
    assert signature_state([key], manifest, None) == "unsigned"
    edited = Manifest(
        manifest.nodes, manifest.edges, manifest.tenants, manifest.lines + 1, manifest.sha256, manifest.bytes
    )
    assert signature_state([key], edited, decoder.signature) == "foreign"  # the signature covers the counts


@pytest.mark.parametrize(
    "line, reason",
    [
        (b'{"node": 9, "labels": ["Outbox"], "properties": {"tenant": "acme"}}\n', "ARCHIVE_LABEL_REFUSED"),
        (b'{"node": 9, "labels": ["Memory", "Lease"], "properties": {"tenant": "acme"}}\n', "ARCHIVE_LABEL_REFUSED"),
        (b'{"node": 9, "labels": ["Memory"], "properties": {"tenant": "a/b"}}\n', "ARCHIVE_TENANT_INVALID"),
        (b'{"node": 9, "labels": ["Memory"], "properties": {"tenant": "beta"}}\n', "ARCHIVE_TENANT_MISMATCH"),
        (
            b'{"node": 9, "labels": ["Memory"], "properties": {"tenant": "acme", "x": {"y": 1}}}\n',
            "ARCHIVE_PROPERTY_INVALID",
        ),
        (
            b'{"node": 9, "labels": ["Memory"], "properties": {"tenant": "acme", "n": 9223372036854775808}}\n',
            "ARCHIVE_PROPERTY_INVALID",
        ),
        (
            b'{"node": 9, "labels": ["Memory"], "properties": {"tenant": "acme", "f": [1.0, NaN]}}\n',
            "ARCHIVE_PROPERTY_INVALID",
        ),
        (b'{"edge": "SUDO", "from": 0, "to": 4, "properties": {}}\n', "ARCHIVE_EDGE_REFUSED"),
        (b'{"edge": "MENTIONS", "from": true, "to": 4, "properties": {}}\n', "ARCHIVE_CORRUPT"),
        (b"[" * 50_000 + b"\n", "ARCHIVE_CORRUPT"),
    ],
)
def test_what_no_backup_writes_is_refused_naming_the_line(line, reason):
    lines = encoded()
    with pytest.raises(ArchiveError) as refused:
        decode([*lines[:3], line, *lines[3:]])
    assert refused.value.reason == reason and "line 4" in refused.value.message
