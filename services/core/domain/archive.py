"""The backup archive's format, pure: its records, manifest, checksum and
signature, and the encoder that writes them. Beside it: the decoder that
checks an archive as it is read (archive_decoder), archives' names and
retention (archive_names), and the rules a restore follows (archive_restore:
which node is which, which of two versions is newer, whose records a caller
may restore).

An archive is gzip'd JSON Lines (docs/backup.md):

    {"format": "memgrid-backup", "version": 2, "created_at": ..., "scope": ..., "tenant": ...}   the header
    {"node": 0, "labels": ["Memory"], "properties": {...}}                                        one per node
    {"edge": "RELATES_TO", "from": 0, "to": 1, "properties": {...}}                               one per edge
    {"manifest": {"nodes": {...}, "edges": {...}, "tenants": {...}, "lines": N, "sha256": ...}}   the last line

Properties are the graph's stored form (times as epoch microseconds,
metadata as JSON text, the embedding as base64 float32), so a restore writes
back exactly what was read. `node` is a number local to the archive; edges
name their ends by it. The manifest's sha256 covers every line before it,
bytes as written (newline included); its counts must match the lines.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from services.core.domain.errors import InvalidArgument
from services.core.domain.model import AUTHORABLE_RELATIONS, SYSTEM_RELATIONS

FORMAT = "memgrid-backup"
VERSION = 2
#: Versions this release restores.
SUPPORTED_VERSIONS = frozenset({VERSION})
SUFFIX = ".jsonl.gz"
#: The name's prefix of an archive of every tenant ('@' never comes out of a tenant's safe name).
EVERY_TENANT = "@all"
#: Labels never exported: run-time state, not data (pending events, run leases, the
#: idempotency keys of creates in flight, which name a request's hash and a memory id).
TRANSIENT_LABELS = frozenset({"Outbox", "Lease", "IdempotencyKey"})
#: The labels export writes, and so the only ones a restore accepts: an archive is untrusted
#: input, and a node of any other label (an Outbox event the relay would publish, a Lease that
#: stops a pass, an IdempotencyKey that answers another create) is refused, the whole archive.
RESTORABLE_LABELS = frozenset(
    {"Memory", "Entity", "Pattern", "MetaPattern", "ConsolidationRun", "Tombstone", "AuditEntry", "AuditCounter"}
)
#: Labels archives written before this release held (idempotency keys): accepted by the decoder,
#: left out one by one by the restore (archive_checks.record_problem), so such an archive still restores.
LEFT_OUT_LABELS = frozenset({"IdempotencyKey"})
#: The edge types export writes: relations (authored and the system's), entity mentions, MetaPattern members.
RESTORABLE_EDGES = frozenset({*AUTHORABLE_RELATIONS, *SYSTEM_RELATIONS, "MENTIONS", "IN_PATTERN"})
#: A tenant's name, as the tokens file accepts it (gateway/tokens_file.py TENANT_PATTERN).
TENANT_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: The audit log's labels: a tenant that already keeps a log keeps its own, and an archive's
#: entries are not written beside it (two sequences in one chain would never verify).
AUDIT_LABELS = frozenset({"AuditEntry", "AuditCounter"})


class ArchiveError(InvalidArgument):
    """An archive that cannot be restored: not gzip, truncated, altered, or of another version."""

    def __init__(self, reason: str, message: str, **details: Any):
        super().__init__(reason, message, field="archive", **details)


@dataclass(frozen=True, slots=True)
class Header:
    created_at: str
    #: "tenant" (one tenant's records) or "every_tenant".
    scope: str
    #: The tenant of a "tenant" archive; None for every tenant's.
    tenant: str | None
    version: int = VERSION
    #: How the point in time was held ("scratch_replica"; "graph.copy" in older archives).
    snapshot: str = ""


@dataclass(frozen=True, slots=True)
class ArchiveNode:
    ref: int
    labels: tuple[str, ...]
    properties: dict[str, Any]

    @property
    def tenant(self) -> str:
        """The node's tenant ("" for a node without one: the decoder refuses such a node)."""
        tenant = self.properties.get("tenant")
        return tenant if isinstance(tenant, str) else ""


@dataclass(frozen=True, slots=True)
class ArchiveEdge:
    type: str
    source: int
    target: int
    properties: dict[str, Any]


@dataclass(slots=True)
class Manifest:
    nodes: dict[str, int] = field(default_factory=dict)
    edges: dict[str, int] = field(default_factory=dict)
    tenants: dict[str, int] = field(default_factory=dict)
    lines: int = 0
    sha256: str = ""
    #: The unpacked bytes of the lines before the manifest (0: an archive from before it was counted).
    bytes: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "nodes": dict(sorted(self.nodes.items())),
            "edges": dict(sorted(self.edges.items())),
            "tenants": dict(sorted(self.tenants.items())),
            "lines": self.lines,
            "sha256": self.sha256,
            "bytes": self.bytes,
        }

    @property
    def memories(self) -> int:
        return self.nodes.get("Memory", 0)

    @property
    def node_count(self) -> int:
        return sum(self.nodes.values())

    @property
    def edge_count(self) -> int:
        return sum(self.edges.values())


def _json(value: Any) -> bytes:
    return (json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")


def label_key(labels: Iterable[str]) -> str:
    """The labels as one counted name (a node has one label in practice)."""
    return ":".join(sorted(labels))


class ArchiveEncoder:
    """Writes an archive's lines in order, keeping the checksum and counts for the manifest."""

    def __init__(self, header: Header):
        self._hash = hashlib.sha256()
        self._nodes: Counter[str] = Counter()
        self._edges: Counter[str] = Counter()
        self._tenants: Counter[str] = Counter()
        self._lines = 0
        self._bytes = 0
        self.header = header

    def _line(self, value: Any) -> bytes:
        data = _json(value)
        self._hash.update(data)
        self._lines += 1
        self._bytes += len(data)
        return data

    def header_line(self) -> bytes:
        h = self.header
        return self._line(
            {
                "format": FORMAT,
                "version": h.version,
                "created_at": h.created_at,
                "scope": h.scope,
                "tenant": h.tenant,
                "snapshot": h.snapshot,
            }
        )

    def node_line(self, node: ArchiveNode) -> bytes:
        self._nodes[label_key(node.labels)] += 1
        self._tenants[node.tenant or ""] += 1
        return self._line({"node": node.ref, "labels": list(node.labels), "properties": node.properties})

    def edge_line(self, edge: ArchiveEdge) -> bytes:
        self._edges[edge.type] += 1
        return self._line({"edge": edge.type, "from": edge.source, "to": edge.target, "properties": edge.properties})

    def manifest(self) -> Manifest:
        return Manifest(
            dict(self._nodes), dict(self._edges), dict(self._tenants), self._lines, self._hash.hexdigest(), self._bytes
        )

    def manifest_line(self, key: bytes | None = None) -> bytes:
        """The last line (not itself counted or hashed), signed with `key` when one is given."""
        manifest = self.manifest()
        line: dict[str, Any] = {"manifest": manifest.as_dict()}
        if key is not None:
            line["signature"] = sign(key, manifest)
        return _json(line)


#: Mixed into every archive signature, so an HMAC made with the same key for anything else never passes.
_SIGNATURE_DOMAIN = b"memgrid-backup-v1."
SIGNATURE_ALGORITHM = "HMAC-SHA256"


def _signed_bytes(manifest: Manifest) -> bytes:
    # The manifest's sha256 covers every line before it (the header included); its counts and size too.
    return _SIGNATURE_DOMAIN + json.dumps(manifest.as_dict(), sort_keys=True, separators=(",", ":")).encode()


def sign(key: bytes, manifest: Manifest) -> dict[str, str]:
    """The signature an archive's last line carries: HMAC-SHA256 over the manifest under the backup key."""
    return {"alg": SIGNATURE_ALGORITHM, "mac": hmac.new(key, _signed_bytes(manifest), hashlib.sha256).hexdigest()}


def signature_state(keys: Iterable[bytes], manifest: Manifest, signature: Any) -> str:
    """Whose signature the archive carries: "signed" (one of `keys`, the backup key or a previous
    one, made it), "foreign" (signed, by no key this deployment holds) or "unsigned"."""
    if not isinstance(signature, dict) or not isinstance(signature.get("mac"), str):
        return "unsigned"
    if signature.get("alg") != SIGNATURE_ALGORITHM:
        return "foreign"
    mac = signature["mac"].encode("ascii", "replace")
    signed = _signed_bytes(manifest)
    for key in keys:
        if hmac.compare_digest(mac, hmac.new(key, signed, hashlib.sha256).hexdigest().encode()):
            return "signed"
    return "foreign"
