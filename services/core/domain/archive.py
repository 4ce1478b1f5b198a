"""The backup archive's format, pure: its lines, manifest, checksum, version
check, names and retention, and the rules a restore follows (which node is
which, which of two versions is newer, whose records a caller may restore).

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
import math
import re
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from services.core.domain.errors import AlreadyExists, InvalidArgument, NotFound, PermissionDenied
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
#: The property naming a node, in order of preference; a node with none of
#: them is matched on its label and tenant only when the archive holds one
#: such node for the tenant (a per-tenant singleton, such as a counter).
IDENTITY_PROPERTIES = ("id", "key", "tag", "event_id", "hash")
#: Labels and edge types go into a query as names: only these are accepted.
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_ARCHIVE_NAME = re.compile(r"^(?P<group>[A-Za-z0-9_@-]{1,200})-(?P<time>\d{8}T\d{12}Z)\.jsonl\.gz$")


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
    def tenant(self) -> str | None:
        tenant = self.properties.get("tenant")
        return tenant if isinstance(tenant, str) else None


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


def _corrupt(line_number: int, what: str) -> ArchiveError:
    return ArchiveError("ARCHIVE_CORRUPT", f"the archive is corrupt: line {line_number} {what}", line=line_number)


def _refused(reason: str, line_number: int, where: str, what: str) -> ArchiveError:
    """A record no backup writes: the whole archive is refused (a forgery, not a damaged record)."""
    return ArchiveError(
        reason, f"the archive is refused: line {line_number} {what} (field {where})", line=line_number, record=where
    )


_INT64 = 1 << 63


def _storable(value: Any) -> bool:
    """A scalar the graph stores: text, a boolean, null, a 64-bit integer, a finite float."""
    if value is None or isinstance(value, str | bool):
        return True
    if isinstance(value, int):
        return -_INT64 <= value < _INT64
    return isinstance(value, float) and math.isfinite(value)


def _check_values(props: dict[str, Any], line_number: int) -> None:
    """Every property a value the graph can store (else the write would fail half-way through a restore)."""
    for name, value in props.items():
        if _storable(value) or (isinstance(value, list) and all(_storable(x) for x in value)):
            continue
        raise _refused(
            "ARCHIVE_PROPERTY_INVALID", line_number, f"properties.{str(name)[:64]}",
            "holds a value no graph property stores (an object, a list of lists, an integer past 64 bits,"
            " NaN or an infinity)",
        )  # fmt: skip


def check_header(value: Any) -> Header:
    """The header of the first line, refused unless it is memgrid's format at a supported version."""
    if not isinstance(value, dict) or value.get("format") != FORMAT:
        raise ArchiveError(
            "ARCHIVE_NOT_MEMGRID", f"the archive is not a {FORMAT} archive (its first line names no such format)"
        )
    version = value.get("version")
    if version not in SUPPORTED_VERSIONS:
        raise ArchiveError(
            "ARCHIVE_VERSION_UNSUPPORTED",
            f"the archive's version {version!r} is not one this release restores"
            f" ({', '.join(str(v) for v in sorted(SUPPORTED_VERSIONS))})",
            version=version,
        )
    scope = value.get("scope")
    tenant = value.get("tenant")
    if scope not in ("tenant", "every_tenant") or (
        scope == "tenant" and not (isinstance(tenant, str) and TENANT_PATTERN.fullmatch(tenant))
    ):
        raise _corrupt(1, "has no valid scope/tenant")
    return Header(str(value.get("created_at", "")), scope, tenant, version, str(value.get("snapshot", "")))


class ArchiveDecoder:
    """Reads an archive's lines in order: checks the header, each record's
    shape, the checksum and the manifest's counts. `feed` returns the record
    of a line (Header, ArchiveNode, ArchiveEdge, or the Manifest);
    `finish` raises unless the manifest came last and matched."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self._nodes: Counter[str] = Counter()
        self._edges: Counter[str] = Counter()
        self._lines = 0
        self._bytes = 0
        #: node number -> its tenant (an edge joins two nodes of one tenant)
        self._refs: dict[int, str] = {}
        self.header: Header | None = None
        self.manifest: Manifest | None = None
        #: The last line's signature, as it came (archive.signature_state tells whose it is).
        self.signature: Any = None

    def feed(self, data: bytes) -> Header | ArchiveNode | ArchiveEdge | Manifest:
        number = self._lines + 1
        if self.manifest is not None:
            raise _corrupt(number, "follows the manifest")
        try:
            value = json.loads(data)
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise _corrupt(number, "is not JSON") from None
        if self.header is None:
            self.header = check_header(value)
            self._count(data)
            return self.header
        if not isinstance(value, dict):
            raise _corrupt(number, "is not an object")
        if "manifest" in value:
            self.manifest = self._check_manifest(value["manifest"], number)
            self.signature = value.get("signature")
            return self.manifest
        record = self._record(value, number)
        self._count(data)
        return record

    def _count(self, data: bytes) -> None:
        self._hash.update(data)
        self._lines += 1
        self._bytes += len(data)

    def _record(self, value: dict, number: int) -> ArchiveNode | ArchiveEdge:
        props = value.get("properties")
        if not isinstance(props, dict):
            raise _corrupt(number, "has no properties object")
        if "node" in value:
            ref, labels = value["node"], value.get("labels")
            if not isinstance(ref, int) or ref in self._refs:
                raise _corrupt(number, "has a missing or repeated node number")
            if (
                not isinstance(labels, list)
                or not labels
                or not all(isinstance(x, str) and _NAME.match(x) for x in labels)
            ):
                raise _corrupt(number, "has no valid labels")
            tenant = props.get("tenant")
            if not isinstance(tenant, str):
                raise _corrupt(number, "is a node without a tenant")
            if len(labels) != 1 or labels[0] not in RESTORABLE_LABELS | LEFT_OUT_LABELS:
                raise _refused(
                    "ARCHIVE_LABEL_REFUSED", number, "labels",
                    f"is a node labelled {labels!r}, which no backup writes"
                    f" (a restore takes only {', '.join(sorted(RESTORABLE_LABELS))})",
                )  # fmt: skip
            if not TENANT_PATTERN.fullmatch(tenant):
                raise _refused(
                    "ARCHIVE_TENANT_INVALID", number, "properties.tenant",
                    f"names the tenant {tenant[:80]!r}, which is no tenant's name ({TENANT_PATTERN.pattern})",
                )  # fmt: skip
            if self.header is not None and self.header.scope == "tenant" and tenant != self.header.tenant:
                raise _refused(
                    "ARCHIVE_TENANT_MISMATCH", number, "properties.tenant",
                    f"is a node of tenant {tenant!r} in an archive of tenant {self.header.tenant!r}",
                )  # fmt: skip
            _check_values(props, number)
            self._refs[ref] = sys.intern(tenant)
            self._nodes[label_key(labels)] += 1
            return ArchiveNode(ref, tuple(labels), props)
        if "edge" in value:
            kind, source, target = value["edge"], value.get("from"), value.get("to")
            if not isinstance(kind, str) or not _NAME.match(kind):
                raise _corrupt(number, "has no valid edge type")
            if (
                type(source) is not int
                or type(target) is not int
                or source not in self._refs
                or target not in self._refs
            ):
                raise _corrupt(number, "is an edge whose ends are not in the archive before it")
            if kind not in RESTORABLE_EDGES:
                raise _refused(
                    "ARCHIVE_EDGE_REFUSED", number, "edge", f"is an edge of type {kind!r}, which no backup writes"
                )
            if self._refs[source] != self._refs[target]:
                raise _refused(
                    "ARCHIVE_EDGE_ACROSS_TENANTS", number, "to",
                    f"is an edge from tenant {self._refs[source]!r} to tenant {self._refs[target]!r}:"
                    " an edge never joins two tenants",
                )  # fmt: skip
            _check_values(props, number)
            self._edges[kind] += 1
            return ArchiveEdge(kind, source, target, props)
        raise _corrupt(number, "is neither a node, an edge nor the manifest")

    def _check_manifest(self, value: Any, number: int) -> Manifest:
        if not isinstance(value, dict):
            raise _corrupt(number, "is not a valid manifest")
        manifest = Manifest(
            nodes=dict(value.get("nodes") or {}),
            edges=dict(value.get("edges") or {}),
            tenants=dict(value.get("tenants") or {}),
            lines=value.get("lines", -1),
            sha256=str(value.get("sha256", "")),
            bytes=value.get("bytes", 0),
        )
        if manifest.sha256 != self._hash.hexdigest():
            raise ArchiveError(
                "ARCHIVE_CHECKSUM_MISMATCH",
                "the archive's checksum does not match its manifest: it was altered or damaged",
                expected=manifest.sha256,
                actual=self._hash.hexdigest(),
            )
        if (
            manifest.lines != self._lines
            or manifest.nodes != dict(self._nodes)
            or manifest.edges != dict(self._edges)
            or manifest.bytes not in (0, self._bytes)
        ):
            raise ArchiveError("ARCHIVE_COUNTS_MISMATCH", "the archive's counts do not match its manifest")
        return manifest

    def finish(self) -> Manifest:
        """The manifest, once every line was fed; refused when it never came (a truncated archive)."""
        if self.header is None:
            raise ArchiveError("ARCHIVE_EMPTY", "the archive is empty")
        if self.manifest is None:
            raise ArchiveError("ARCHIVE_TRUNCATED", f"the archive is truncated: no manifest after line {self._lines}")
        return self.manifest


# -- names and retention ---------------------------------------------------------------------------


def safe_tenant(tenant: str) -> str:
    """The tenant reduced to characters safe in a file name."""
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in tenant) or "_"


def archive_name(tenant: str | None, at: datetime) -> str:
    """<tenant>-<UTC time>.jsonl.gz (`@all-` for every tenant's): sortable by time within a tenant."""
    group = EVERY_TENANT if tenant is None else safe_tenant(tenant)
    return f"{group}-{at.astimezone(UTC):%Y%m%dT%H%M%S%fZ}{SUFFIX}"


def check_name(name: str) -> str:
    """A name as archive_name makes them (no path, no other file): refused otherwise."""
    if not isinstance(name, str) or not _ARCHIVE_NAME.match(name):
        raise InvalidArgument(
            "BACKUP_NAME_INVALID",
            f"'name' must be a backup's name as GET /backups lists it, not {name!r}",
            field="name",
        )
    return name


def name_group(name: str) -> str:
    """The tenant part of a name (what retention counts within)."""
    match = _ARCHIVE_NAME.match(name)
    return match.group("group") if match else ""


def name_time(name: str) -> str:
    match = _ARCHIVE_NAME.match(name)
    return match.group("time") if match else ""


def to_prune(names: Iterable[str], keep: int) -> list[str]:
    """The names retention removes: all but the `keep` newest of each tenant's
    (and of every-tenant archives); keep 0 removes none."""
    if keep <= 0:
        return []
    groups: dict[str, list[str]] = {}
    for name in names:
        if _ARCHIVE_NAME.match(name):
            groups.setdefault(name_group(name), []).append(name)
    doomed = []
    for members in groups.values():
        members.sort(key=name_time, reverse=True)
        doomed.extend(members[keep:])
    return sorted(doomed)


def missing_backup(name: str) -> NotFound:
    return NotFound("BACKUP_NOT_FOUND", f"no backup named {name!r} (GET /backups lists them)", field="name")


# -- restore rules ---------------------------------------------------------------------------------


def identity(node: ArchiveNode) -> tuple[str, Any] | None:
    """The property that names the node (and its value), or None for a node with none."""
    for name in IDENTITY_PROPERTIES:
        value = node.properties.get(name)
        if isinstance(value, str | int) and not isinstance(value, bool):
            return name, value
    return None


#: What says which of two versions of a record is newer, in order (`seq`: a counter's).
VERSION_PROPERTIES = ("version", "updated_at", "seq")


def _version_key(properties: dict[str, Any]) -> tuple:
    values = (properties.get(name) for name in VERSION_PROPERTIES)
    return tuple(v if isinstance(v, int | float) and not isinstance(v, bool) else -1 for v in values)


def is_newer(archived: dict[str, Any], existing: dict[str, Any]) -> bool:
    """Whether the archive's record is newer than the stored one (its version,
    then its updated_at, then its seq is higher): only then does a merge
    overwrite it. A tie, or neither saying, keeps what is stored."""
    return _version_key(archived) > _version_key(existing)


def check_tenants(tenants: Iterable[str], caller: str, every_tenant: bool) -> None:
    """A caller restores only its own tenant's records unless it may act for
    every tenant (an admin), which restores each record into its own tenant."""
    if every_tenant:
        return
    foreign = sorted(t for t in set(tenants) if t != caller)
    if foreign:
        raise PermissionDenied(
            "RESTORE_OTHER_TENANT",
            f"the archive holds records of tenant(s) {', '.join(repr(t) for t in foreign[:5])}, not of the caller's"
            f" tenant {caller!r}: only an operator restores another tenant's records",
            field="archive",
        )


def tenant_not_empty(tenant: str, memories: int) -> AlreadyExists:
    """Restoring into a tenant that holds memories, without merge (409: the caller may ask merge)."""
    return AlreadyExists(
        "TENANT_NOT_EMPTY",
        f"tenant {tenant!r} already holds {memories} memories: restore into an empty tenant, or ask merge=true"
        " (which keeps a stored record that is newer than the archive's)",
        field="merge",
        tenant=tenant,
        memories=memories,
    )
