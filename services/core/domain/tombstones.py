"""Tombstones: content a tenant rejected stays out (docs/trust.md), pure.

A tombstone is keyed on the tenant and the hash of the normalised content
(case and runs of whitespace ignored, the rule recall's de-duplication
uses), so storing the same text again is refused (409, naming the
tombstone) unless the request says force=true, which the event records.
A tombstone is left by DELETE /memory/{id}?reason=rejected (or
tombstone=true), by a review's rejection, and by a supersede with
INVALIDATED_BY (the old content was wrong, not merely outgrown).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from services.core.domain.errors import AlreadyExists, InvalidArgument

#: Why a tombstone was left.
REJECTED = "rejected"
INVALIDATED = "invalidated"
DELETED = "deleted"
REVIEW_REJECTED = "review_rejected"
#: The reasons DELETE /memory/{id}?reason= takes; "rejected" leaves a tombstone.
DELETE_REASONS = ("", REJECTED)


def normalise_content(content: str) -> str:
    """The content as compared for identity: lowercase, whitespace collapsed."""
    return " ".join(content.lower().split())


def content_hash(content: str) -> str:
    """The tombstone key of a content (sha256 of the normalised text)."""
    return hashlib.sha256(normalise_content(content).encode("utf-8")).hexdigest()


def tombstone_id(tenant: str, digest: str) -> str:
    """A stable id per (tenant, hash): a second tombstone for the same content is the same one."""
    return hashlib.sha256(f"{tenant}\x00{digest}".encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Tombstone:
    """Rejected content of one tenant, kept as its hash (and a short excerpt to recognise it)."""

    id: str
    tenant: str
    content_hash: str
    reason: str
    memory_id: str
    created_at: datetime
    excerpt: str = ""


#: Characters of the content a tombstone keeps, for the admin listing.
EXCERPT_CHARS = 120


def tombstone_for(tenant: str, memory_id: str, content: str, reason: str, now: datetime) -> Tombstone:
    """The tombstone a rejection of `content` leaves."""
    digest = content_hash(content)
    excerpt = normalise_content(content)[:EXCERPT_CHARS]
    return Tombstone(tombstone_id(tenant, digest), tenant, digest, reason, memory_id, now, excerpt)


def delete_leaves_tombstone(reason: str | None, tombstone: bool) -> bool:
    """Whether a DELETE leaves a tombstone: reason=rejected or tombstone=true.
    Another reason is INVALID_ARGUMENT naming the field."""
    value = (reason or "").strip().lower()
    if value not in DELETE_REASONS:
        raise InvalidArgument(
            "INVALID_DELETE_REASON", f"reason must be 'rejected' or omitted, not {reason!r}", field="reason"
        )
    return tombstone or value == REJECTED


def refuse_tombstoned(found: Tombstone, index: int | None = None) -> AlreadyExists:
    """The 409 a write of tombstoned content gets (index: the batch item)."""
    where = f"Memory at index {index}: " if index is not None else ""
    return AlreadyExists(
        "CONTENT_TOMBSTONED",
        f"{where}this content was rejected before (tombstone {found.id}, reason {found.reason});"
        " send force=true to store it anyway",
        field="content",
        tombstone_id=found.id,
        tombstone_reason=found.reason,
        **({"index": index} if index is not None else {}),
    )


@dataclass(frozen=True, slots=True)
class TombstoneGuard:
    """What a create's own query checks against the tenant's tombstones, so
    the check and the write are one step (a tombstone left by a concurrent
    rejection cannot slip in between). Per memory, in the write's order:
    `hashes`, the content hashes of its texts (the content and a
    summarised memory's original); `passed`, the hash of the tombstone its
    event says it was forced past ("" when none). The write goes ahead only
    where each memory's first held hash is exactly the one it passed."""

    tenant: str
    hashes: tuple[tuple[str, ...], ...]
    passed: tuple[str, ...]

    @staticmethod
    def of(tenant: str, hashes: list[list[str]], forced: dict[int, Tombstone] | None = None) -> TombstoneGuard:
        """The guard for memories with these hashes; `forced`, by memory
        index, the tombstones their events were forced past."""
        forced = forced or {}
        passed = tuple(forced[i].content_hash if i in forced else "" for i in range(len(hashes)))
        return TombstoneGuard(tenant, tuple(tuple(h) for h in hashes), passed)

    def hits(self, held: dict[str, Tombstone]) -> dict[int, Tombstone]:
        """By memory index, the tombstone holding its content (its first hash held)."""
        found = {i: next((held[h] for h in hs if h in held), None) for i, hs in enumerate(self.hashes)}
        return {i: stone for i, stone in found.items() if stone is not None}


class TombstoneHeld(Exception):
    """A guarded write found tombstones it was not told to pass, and wrote
    nothing: a signal between the writer and ingest, which no caller sees.
    `held`: every tombstone among the guard's hashes, by hash; ingest turns
    it into CONTENT_TOMBSTONED, or with force into the events' `forced`
    marks and another try."""

    def __init__(self, held: dict[str, Tombstone]):
        super().__init__(f"tombstones hold this content: {sorted(t.id for t in held.values())}")
        self.held = held
