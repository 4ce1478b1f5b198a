"""An archive read line by line, pure: the header's format and version,
each record's shape, the checksum and the manifest's counts
(services.core.domain.archive has the format). An archive is untrusted
input: what only a forgery holds refuses the whole archive here; what one
record alone can get wrong is archive_checks'.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from collections import Counter
from typing import Any

from services.core.domain.archive import (
    FORMAT,
    LEFT_OUT_LABELS,
    RESTORABLE_EDGES,
    RESTORABLE_LABELS,
    SUPPORTED_VERSIONS,
    TENANT_PATTERN,
    ArchiveEdge,
    ArchiveError,
    ArchiveNode,
    Header,
    Manifest,
    label_key,
)

#: Labels and edge types go into a query as names: only these are accepted.
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


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
