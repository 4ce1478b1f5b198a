"""What a restore checks of each record it reads, pure: an archive is
untrusted input (docs/backup.md, "An archive is untrusted input").

The decoder (archive_decoder.ArchiveDecoder) refuses the whole archive for what only
a forgery holds: a label or edge type no backup writes, a tenant that is no
tenant's name, an edge joining two tenants. Here, what one record alone can
get wrong, so that record (and the edges touching it) is left out and
counted while the rest is restored: an id where memgrid mints a UUID that is
none, a tombstone whose id is not the one its tenant and hash give (a
tombstone is found by id: a forged one would answer for another tenant's),
a memory twice. And the audit log: a tenant's entries are written only when
they verify as a chain (audit.py's rules), with the counter that closes
them; otherwise the tenant's whole log is left out and counted.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from typing import Any

from services.core.domain import audit
from services.core.domain.archive import LEFT_OUT_LABELS, ArchiveNode
from services.core.domain.tombstones import tombstone_id

#: Labels whose `id` memgrid mints as a UUID (a memory's in its canonical text).
_UUID_IDS = ("Memory", "MetaPattern", "ConsolidationRun")
#: The audit log's sequence keys: tenant, '/', the sequence in 15 digits (adapters/falkor/audit.py).
_SEQ_DIGITS = 15


def _is_uuid(value: Any, *, canonical: bool) -> bool:
    if not isinstance(value, str):
        return False
    try:
        parsed = uuid.UUID(value)
    except ValueError:
        return False
    return not canonical or str(parsed) == value


def record_problem(node: ArchiveNode) -> tuple[str, str] | None:
    """(field, why) when this record cannot be restored on its own; None when it can."""
    label, props = node.labels[0], node.properties
    if label in LEFT_OUT_LABELS:
        return "labels", "run-time state (an idempotency key answers a create with its memory), never restored"
    if label in _UUID_IDS and not _is_uuid(props.get("id"), canonical=label == "Memory"):
        return "properties.id", f"{str(props.get('id'))[:80]!r} is not a UUID (memgrid mints {label} ids)"
    if label == "Tombstone":
        digest = props.get("content_hash")
        if not isinstance(digest, str) or props.get("id") != tombstone_id(node.tenant or "", digest):
            return "properties.id", "is not the id its tenant and content_hash give a tombstone"
    return None


class Seen:
    """The memories already read, by (tenant, id), as short digests (a memory twice would break
    the graph's unique key half-way through the write)."""

    def __init__(self) -> None:
        self._seen: set[bytes] = set()

    def again(self, node: ArchiveNode) -> bool:
        if node.labels[0] != "Memory":
            return False
        key = hashlib.blake2b(f"{node.tenant}\x00{node.properties.get('id')}".encode(), digest_size=16).digest()
        if key in self._seen:
            return True
        self._seen.add(key)
        return False


@dataclass(slots=True)
class _Log:
    #: (seq, computed content hash, stored content hash, stored chain hash) per entry
    entries: list[tuple[int, str, str, str]] = field(default_factory=list)
    counter: dict[str, Any] | None = None
    counters: int = 0
    broken: str = ""


def _seq_key(tenant: str, seq: int) -> str:
    return f"{tenant}/{seq:0{_SEQ_DIGITS}d}"


class AuditChains:
    """The archive's audit logs, one per tenant, checked as chains once every entry was read."""

    def __init__(self) -> None:
        self._logs: dict[str, _Log] = {}

    def add(self, node: ArchiveNode, line: int) -> None:
        tenant, props = node.tenant or "", node.properties
        log = self._logs.setdefault(tenant, _Log())
        if node.labels[0] == "AuditCounter":
            log.counters += 1
            log.counter = props
            return
        seq = props.get("seq")
        if type(seq) is not int or seq < 1 or props.get("akey") != _seq_key(tenant, seq):
            log.broken = log.broken or f"line {line}: an entry's seq or akey is not its tenant's"
            return
        entry = audit.AuditEntry(
            tenant, seq, _int(props.get("at")), str(props.get("event_id") or ""), str(props.get("record") or "")
        )
        parsed = entry.parsed
        if props.get("memory_id") != parsed.get("memory_id") or props.get("kind") != parsed.get("kind"):
            log.broken = log.broken or f"line {line}: entry {seq}'s memory_id or kind is not its record's"
        content = audit.content_hash(entry)
        log.entries.append((seq, content, str(props.get("content_hash") or ""), str(props.get("chain") or "")))

    def refused(self, *, signed: bool) -> dict[str, str]:
        """Tenant -> why its log is left out. A log verifies when its entries run 1..n without a
        gap, each sealed one's hashes recomputed match (audit.Verification's rules), and its one
        counter ends where the entries do. An unsealed tail (entries the sealer had not reached)
        is trusted only in an archive this deployment signed: nothing else vouches for it."""
        out = {}
        for tenant, log in self._logs.items():
            why = log.broken or _chain_problem(log, signed=signed)
            if why:
                out[tenant] = why
        return out


def _int(value: Any) -> int:
    return value if type(value) is int else 0


def _chain_problem(log: _Log, *, signed: bool) -> str:
    if log.counters != 1:
        return f"{log.counters} audit counters"
    chain, sealed_through, unsealed = audit.GENESIS, 0, False
    log.entries.sort()
    for expected, (seq, content, stored_content, stored_chain) in enumerate(log.entries, start=1):
        if seq != expected:
            return f"entry {expected} is missing or repeated"
        if not stored_chain:
            if not signed:
                return f"entry {seq} is not sealed, and the archive is not this deployment's"
            unsealed = True
            continue
        if unsealed:
            return f"entry {seq} is sealed after an unsealed entry"
        if content != stored_content:
            return f"entry {seq} was edited (its content hash does not match)"
        chain = audit.chain_hash(chain, content)
        if chain != stored_chain:
            return f"entry {seq} does not chain to the entry before it"
        sealed_through = seq
    counter = log.counter or {}
    if _int(counter.get("seq")) != len(log.entries):
        return f"the counter says {counter.get('seq')!r} entries, the archive holds {len(log.entries)}"
    if _int(counter.get("sealed_seq")) != sealed_through or (sealed_through and counter.get("sealed_chain") != chain):
        return "the counter's sealed sequence or chain is not the entries'"
    return ""


def problem_text(line: int, node: ArchiveNode, where: str, why: str) -> str:
    """One line of the restore answer's `problems`."""
    return f"line {line}: {node.labels[0]} {where}: {why}"
