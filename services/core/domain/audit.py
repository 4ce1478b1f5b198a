"""The audit log's rules, pure: what an entry records, its canonical form,
the record hash, the field-level diff, and the hash chain that makes an edit
or a deletion of an entry detectable.

An entry is built from the MemoryEvent a write records (generic over the
event kind: kind, memory id, version, and what the event carries), the actor
and, where the writer holds them, the record before and after. The store
gives it a per-tenant sequence number in the write's own query; a sealer later
chains the entries in order: chain_i = sha256(chain_{i-1} || content_i), where
content_i = sha256(canonical(entry_i)). verify() recomputes the chain from
entry 1 and names the first entry that does not match.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any

from services.core.domain.model import TIME_FIELDS, Memory, MemoryEvent
from services.core.domain.times import to_micros

#: The chain's value before entry 1.
GENESIS = "0" * 64
#: The record's fields an entry hashes and diffs: what a user wrote or a
#: service derived, not the embedding (a vector's bytes say nothing to a
#: reader; its presence is in the event), the search copies, nor what moves
#: without a write of its own (last_accessed on reads, relevance_score on
#: every decay pass), so a record's hash changes only with an audited change.
AUDITED_FIELDS = (
    "content", "type", "confidence", "importance", "tags", "metadata", "summary", "archived",
    "factuality", "trust_state", "review_rule", *(t for t in TIME_FIELDS if t != "last_accessed"),
)  # fmt: skip
#: Fields a diff leaves out: they change on every write and say nothing.
_DIFF_SKIP = frozenset({"updated_at", "last_accessed"})


#: The canonical form's encoder, made once: json.dumps with these options
#: builds one on every call (a third of its time for a record).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _json(value: Any) -> str:
    """Canonical JSON: sorted keys, no spaces, UTF-8 kept."""
    return _CANONICAL.encode(value)


#: The audited fields read at once, and where the times are among them (a getattr and a
#: search of TIME_FIELDS for each field were 40% of record_fields' time).
_AUDITED = attrgetter(*AUDITED_FIELDS)
_AUDITED_TIMES = tuple(i for i, name in enumerate(AUDITED_FIELDS) if name in TIME_FIELDS)


def record_fields(memory: Memory) -> dict[str, Any]:
    """The audited fields of a record, as JSON values (times in epoch microseconds)."""
    values = list(_AUDITED(memory))
    for i in _AUDITED_TIMES:
        values[i] = to_micros(values[i])
    for i, value in enumerate(values):
        if isinstance(value, tuple):
            values[i] = list(value)
    return dict(zip(AUDITED_FIELDS, values, strict=True))


def record_hash(memory: Memory | None) -> str:
    """sha256 of the record's canonical form; "" for no record."""
    if memory is None:
        return ""
    return hashlib.sha256(_json({"id": memory.id, **record_fields(memory)}).encode()).hexdigest()


def field_diff(before: Memory | None, after: Memory | None) -> dict[str, list[Any]]:
    """{field: [before, after]} for each audited field that differs (both
    records needed; otherwise empty: a create or a delete is the whole record)."""
    if before is None or after is None:
        return {}
    old, new = record_fields(before), record_fields(after)
    return {k: [old[k], new[k]] for k in AUDITED_FIELDS if k not in _DIFF_SKIP and old[k] != new[k]}


def entry_record(event: MemoryEvent, actor: str, *, before: Memory | None = None, after: Memory | None = None) -> str:
    """The entry's content, as canonical JSON, for any event kind: the store
    keeps this text verbatim and the chain hashes it."""
    record: dict[str, Any] = {
        "actor": actor,
        "kind": event.kind.value,
        "memory_id": event.memory_id,
        "version": event.version,
        "before_hash": record_hash(before),
        "after_hash": record_hash(after),
        "diff": field_diff(before, after),
    }
    detail: dict[str, Any] = {}
    if event.content_changed:
        detail["content_changed"] = True
    if event.relation is not None:
        r = event.relation
        detail["relation"] = {"type": r.type, "source": r.source_id, "target": r.target_id, "strength": r.strength}
    # Fields a later event kind adds (trust, review, tombstones, forced) are
    # carried generically: any other field of the event holding a plain value.
    for name in _extra_fields(type(event)):
        value = getattr(event, name)
        if isinstance(value, str | int | float | bool) and value:  # left out at their defaults ("", False, 0)
            detail[name] = value
    record["detail"] = detail
    return _json(record)


_EXTRA_FIELDS: dict[type, tuple[str, ...]] = {}


def _extra_fields(kind: type) -> tuple[str, ...]:
    """An event class's fields beyond the core ones, found once a class
    (dataclasses.fields() is slow on every event)."""
    found = _EXTRA_FIELDS.get(kind)
    if found is None:
        found = _EXTRA_FIELDS[kind] = tuple(f.name for f in fields(kind) if f.name not in _EVENT_CORE)
    return found


_EVENT_CORE = frozenset(
    {"event_id", "tenant", "kind", "memory_id", "version", "occurred_at", "content_changed", "relation",
     "has_embedding"}
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One entry as stored: its sequence in the tenant's log, when (the
    write's time, epoch microseconds), the event it records and its content
    (the canonical JSON of entry_record), and the hashes once sealed."""

    tenant: str
    seq: int
    at_us: int
    event_id: str
    record: str
    content_hash: str = ""
    chain_hash: str = ""

    @property
    def parsed(self) -> dict[str, Any]:
        """The record parsed ({} when it is not JSON: verify reports such an entry)."""
        try:
            value = json.loads(self.record)
        except (TypeError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}

    @property
    def sealed(self) -> bool:
        return bool(self.chain_hash)


def canonical(entry: AuditEntry) -> bytes:
    """What the content hash covers: every stored field but the hashes."""
    stored = {"tenant": entry.tenant, "seq": entry.seq, "at": entry.at_us, "event_id": entry.event_id}
    return _json({**stored, "record": entry.record}).encode()


def content_hash(entry: AuditEntry) -> str:
    return hashlib.sha256(canonical(entry)).hexdigest()


def chain_hash(previous: str, content: str) -> str:
    """sha256(previous chain hash || this entry's content hash)."""
    return hashlib.sha256((previous + content).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Seal:
    """The hashes the sealer writes on one entry."""

    seq: int
    content_hash: str
    chain_hash: str


def seal(previous_chain: str, entries: list[AuditEntry]) -> list[Seal]:
    """Seal entries in sequence order after the chain value `previous_chain`.
    A gap (a deleted entry) does not stop sealing: later entries are chained
    to the last one present, and verify reports the gap."""
    seals = []
    chain = previous_chain
    for entry in sorted(entries, key=lambda e: e.seq):
        content = content_hash(entry)
        chain = chain_hash(chain, content)
        seals.append(Seal(entry.seq, content, chain))
    return seals


@dataclass(slots=True)
class Verification:
    """verify()'s running state and answer: entries checked, the last sealed
    sequence, and the first broken entry (0: none) with why."""

    checked: int = 0
    sealed_through: int = 0
    broken_seq: int = 0
    reason: str = ""
    _expected: int = 1
    _chain: str = GENESIS
    _unsealed_seen: bool = field(default=False, repr=False)

    @property
    def ok(self) -> bool:
        return self.broken_seq == 0

    def _break(self, seq: int, reason: str) -> None:
        if self.ok:
            self.broken_seq, self.reason = seq, reason

    def feed(self, entries: list[AuditEntry]) -> None:
        """Check the next page of entries (in sequence order); stops at the first break."""
        for entry in entries:
            if not self.ok:
                return
            if entry.seq < self._expected:
                self._break(entry.seq, f"entry {entry.seq} appears twice")
                return
            if entry.seq > self._expected:
                self._break(self._expected, f"entry {self._expected} is missing (removed from the store)")
                return
            self._expected += 1
            self.checked += 1
            if not entry.sealed:
                self._unsealed_seen = True  # the unsealed tail: only its sequence can be checked yet
                continue
            if self._unsealed_seen:
                self._break(entry.seq, f"entry {entry.seq} is sealed after an unsealed entry")
                return
            content = content_hash(entry)
            if content != entry.content_hash:
                self._break(entry.seq, f"entry {entry.seq} was edited (its content hash does not match)")
                return
            chained = chain_hash(self._chain, content)
            if chained != entry.chain_hash:
                self._break(entry.seq, f"entry {entry.seq} does not chain to the entry before it")
                return
            self._chain = chained
            self.sealed_through = entry.seq

    def finish(self, last_seq: int) -> Verification:
        """After the last page: entries after the last one found, up to the
        tenant's counter `last_seq`, were removed."""
        if self.ok and last_seq >= self._expected:
            self._break(self._expected, f"entry {self._expected} is missing (removed from the store)")
        return self


def verify(entries: list[AuditEntry], last_seq: int) -> Verification:
    """Check a whole log at once (the store pages through feed() instead)."""
    check = Verification()
    check.feed(entries)
    return check.finish(last_seq)


def with_before_hashes(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One memory's entries in order, each before_hash that its writer did
    not know (a delete, or a background write that did not read the whole
    record) filled with the previous entry's after_hash, for display."""
    last = ""
    out = []
    for entry in entries:
        if not entry.get("before_hash") and last:
            entry = {**entry, "before_hash": last}
        last = entry.get("after_hash") or last
        out.append(entry)
    return out
